"""Leaving a page and coming back, in a real browser (issue 39, observation 7, and the 404 of
observation 8): Debian's Chromium driven by Playwright, against a real ``soulacy serve``.

- Leaving the agent editor or Settings with unsaved edits asks: discard them, or stay (the
  edits and the address stay); closing the tab asks the browser's own question.
- Reloading ``#/chat?agent=X`` reopens the conversation on screen, and starting a conversation
  asks the server for nothing that is not there (no 404 in the console).

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _support.http_server import CHROMIUM, KEYS
from playwright.sync_api import expect
from portal_support import add_agents, advanced_config, browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)


def test_leaving_the_editor_with_unsaved_edits_asks_to_discard_them_or_stay(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    soul = workspace.path / "agents" / "echo" / "SOUL.yaml"
    before = soul.read_bytes()
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"])
        page.goto(url + "/#/agents/echo")
        description = page.get_by_label("Description", exact=True)
        description.fill("edited, not saved")
        dialog = page.get_by_role("dialog", name="Unsaved changes")

        page.get_by_role("link", name="All agents").click()
        dialog.wait_for()
        page.screenshot(path=str(screenshots / "leave-unsaved.png"))
        assert page.evaluate("document.activeElement.textContent") == "Stay on this page"
        page.keyboard.press("Enter")  # the keyboard answers: stay
        dialog.wait_for(state="hidden")
        expect(page).to_have_url(re.compile(r"#/agents/echo$"))
        assert description.input_value() == "edited, not saved"
        assert page.locator(".pending").inner_text() == "1 unsaved change"

        page.get_by_role("link", name="Runs").click()
        dialog.wait_for()
        page.keyboard.press("Escape")  # Escape stays too
        dialog.wait_for(state="hidden")
        assert description.input_value() == "edited, not saved"

        # Closing the tab: the browser's own question.
        asked: list[str] = []
        page.on("dialog", lambda d: (asked.append(d.type), d.dismiss()))
        page.close(run_before_unload=True)
        page.wait_for_event("dialog") if not asked else None
        assert asked == ["beforeunload"]

        page.context.close()
        page = browser_page(browser, KEYS["root"])
        page.goto(url + "/#/agents/echo")
        page.get_by_label("Description", exact=True).fill("edited, then dropped")
        page.get_by_role("link", name="All agents").click()
        page.get_by_role("dialog", name="Unsaved changes").get_by_role(
            "button", name="Discard changes"
        ).click()
        page.get_by_role("heading", name="Agents", exact=True).wait_for()
        assert page.evaluate("location.hash") == "#/agents"
        page.get_by_role("link", name="echo").click()  # back: the saved value, no question
        page.get_by_role("heading", name="Purpose", exact=True).wait_for()
        page.get_by_role("link", name="All agents").click()
        page.get_by_role("heading", name="Agents", exact=True).wait_for()
        assert page.get_by_role("dialog", name="Unsaved changes").is_hidden()
        assert page_errors(page) == []
        page.context.close()
    assert soul.read_bytes() == before


def test_leaving_settings_with_unsaved_edits_asks_too(workspace: Workspace, browser: Any) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["root"])
        page.goto(url + "/#/settings")
        page.get_by_label("Default model", exact=True).fill("bigger")
        page.get_by_role("link", name="Chat").click()
        dialog = page.get_by_role("dialog", name="Unsaved changes")
        dialog.wait_for()
        dialog.get_by_role("button", name="Stay on this page").click()
        expect(page).to_have_url(re.compile(r"#/settings$"))
        assert page.get_by_label("Default model", exact=True).input_value() == "bigger"
        page.get_by_role("button", name="Discard").click()  # the page's own discard: no question
        page.get_by_role("link", name="Chat").click()
        page.get_by_role("textbox", name="Message").wait_for()
        assert page_errors(page) == []
        page.context.close()


def test_reloading_a_chat_reopens_the_conversation_on_screen_without_a_404(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        page.goto(url + "/#/chat?agent=echo")
        page.get_by_role("textbox", name="Message").fill("remember me")
        page.get_by_role("button", name="Send").click()
        page.locator("article.assistant[data-status='completed']").wait_for()
        session = page.locator(".session").inner_text()

        page.reload()
        page.locator(".msg.user", has_text="remember me").wait_for()
        assert page.locator(".session").inner_text() == session
        assert page.locator("article.assistant[data-status='completed']").count() == 1
        assert failed == []
        assert page_errors(page) == []
        page.context.close()
