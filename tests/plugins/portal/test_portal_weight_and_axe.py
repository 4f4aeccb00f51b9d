"""What the portal costs to open and how it reads to assistive technology, in a real browser:
Debian's Chromium driven by Playwright, against a real ``soulacy serve`` on loopback.

- A cold load (a fresh browser, nothing cached) of the chat page is at most 200 KB; the bytes
  and seconds are printed (``-s``) for the notes, never asserted on time.
- axe-core finds no violation on the screens of this issue: a reply rendered from Markdown with
  its usage and tools and its actions, a conversation being renamed, its delete question, a
  message being edited, a run's timeline, an incomplete reply's Continue form (and the
  timeline's), the unsaved-changes question, a refused save with its errors, the header at
  390 px. axe-core is an npm package: the test runs where ``$SOULACY_AXE_JS`` (or a known
  install) has ``axe.min.js``, and skips saying so elsewhere.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from _support.http_server import CHROMIUM, KEYS
from portal_support import add_agents, add_counter, advanced_config, browser_page, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
COLD_LOAD_LIMIT = 200_000  # bytes
AXE_PLACES = (
    "/usr/lib/node_modules/axe-core/axe.min.js",
    "/usr/local/lib/node_modules/axe-core/axe.min.js",
    "/usr/share/nodejs/axe-core/axe.min.js",
)
REPLY = "## Done\nA **bold** answer with `code`:\n\n```sh\nls -la\n```\n\n- one\n- two\n"


def axe_script() -> Path | None:
    for place in (os.environ.get("SOULACY_AXE_JS"), *AXE_PLACES):
        if place and Path(place).is_file():
            return Path(place)
    return None


def test_a_cold_load_of_the_portal_is_at_most_200_kb(workspace: Workspace, browser: Any) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        sizes: dict[str, int] = {}

        def count(request: Any) -> None:
            found = request.sizes()
            sizes[request.url] = found["responseBodySize"] + found["responseHeadersSize"]

        page.on("requestfinished", count)
        began = time.monotonic()
        page.goto(url + "/")
        page.get_by_role("textbox", name="Message").wait_for()
        page.locator("#who", has_text="alice").wait_for()
        seconds = time.monotonic() - began  # until the page is usable (not asserted)
        page.wait_for_load_state("networkidle")  # every byte of the load counted
        total = sum(sizes.values())
        kb = total / 1000
        print(f"\ncold load: {kb:.1f} KB in {len(sizes)} requests, usable in {seconds:.2f} s")
        assert total <= COLD_LOAD_LIMIT, sizes
        page.context.close()


@pytest.mark.skipif(axe_script() is None, reason="needs axe-core's axe.min.js ($SOULACY_AXE_JS)")
def test_axe_finds_no_violation_on_the_new_screens(workspace: Workspace, browser: Any) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    workspace.scripted_agent("writer", [{"text": REPLY}], repeat=True)
    add_counter(workspace)  # its runs end incomplete (max_turns)
    script = axe_script()
    assert script is not None
    found: dict[str, list[str]] = {}
    with soulacy_serve(workspace.path) as (url, _):
        for width in (1280, 390):
            context = browser.new_context(viewport={"width": width, "height": 800}, bypass_csp=True)
            context.add_init_script(f"sessionStorage.setItem('soulacy-key', '{KEYS['root']}')")
            page = context.new_page()
            page.set_default_timeout(30_000)

            def check(screen: str, page: Any = page, width: int = width) -> None:
                page.add_script_tag(path=str(script))
                result = page.evaluate("axe.run(document).then(r => r.violations)")
                found[f"{screen} at {width}"] = [
                    f"{v['id']}: {[n['target'] for n in v['nodes']]}" for v in result
                ]

            page.goto(url + "/#/chat?agent=writer")
            page.get_by_role("textbox", name="Message").fill("go")
            page.get_by_role("button", name="Send").click()
            page.locator("article.assistant[data-status='completed'] .code-block").wait_for()
            page.locator("#who", has_text="root").wait_for()
            check("chat with a Markdown reply")

            # (the conversations of both widths are "go": the newest is the one on screen)
            page.get_by_role("button", name="Rename the conversation go").first.click()
            page.get_by_role("textbox", name="New title (empty: its first message)").press("Escape")
            page.get_by_role("button", name="Rename the conversation go").first.click()
            check("a conversation being renamed")
            page.get_by_role("button", name="Cancel", exact=True).click()
            page.get_by_role("button", name="Delete the conversation go").first.click()
            page.get_by_role("button", name="Keep").wait_for()
            check("a conversation's delete question")
            page.get_by_role("button", name="Keep").click()
            page.get_by_role("button", name="Edit your message and ask again").click()
            page.get_by_role("textbox", name="Edit your message").wait_for()
            check("a message being edited")
            page.get_by_role("textbox", name="Edit your message").press("Escape")

            page.get_by_role("link", name="Timeline of this run").click()
            page.locator("ol.timeline > li[data-kind='ended']").wait_for()
            check("a run's timeline")

            page.goto(url + "/#/chat?agent=counter")
            page.get_by_role("textbox", name="Message").fill("count")
            page.get_by_role("button", name="Send").click()
            page.locator("article.assistant[data-status='incomplete']").wait_for()
            page.get_by_role("button", name="Continue", exact=True).click()
            page.get_by_role("button", name="Continue the run").wait_for()
            check("an incomplete reply with its Continue form")
            page.get_by_role("link", name="Timeline of this run").click()
            page.get_by_role("button", name="Continue", exact=True).click()
            page.get_by_role("button", name="Continue the run").wait_for()
            check("an incomplete run's timeline with its Continue form")

            page.goto(url + "/#/agents/echo")
            page.get_by_role("button", name="Advanced").click()
            page.get_by_label("Temperature", exact=True).fill("5")
            page.get_by_role("button", name="Save agent").click()
            page.locator(".save-status", has_text="Not saved").wait_for()
            check("editor with a refused save")

            page.get_by_role("link", name="All agents").click()
            page.get_by_role("dialog", name="Unsaved changes").wait_for()
            check("the unsaved-changes question")
            page.get_by_role("button", name="Discard changes").click()
            page.locator("#new-provider").wait_for()
            check("agents with the new agent's provider")

            page.get_by_role("link", name="Runs").click()
            page.locator("td.cost").first.wait_for()
            page.locator("section.today meter").first.wait_for()
            check("runs with their cost and today's spend against the budgets")

            page.get_by_role("link", name="Settings").click()
            page.get_by_label("Workspace provider", exact=True).fill("locl")
            page.get_by_role("button", name="Save changes").click()
            page.locator(".field[data-key='llm.default.provider'] .error").wait_for()
            check("settings with a refused provider")
            page.get_by_role("button", name="Discard").click()
            context.close()
    assert found == {screen: [] for screen in found}, found
