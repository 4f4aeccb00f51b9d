"""Continuing an incomplete run from the portal (issue "Step 27", a portal button), in Debian's
Chromium driven by Playwright, against a real ``soulacy serve`` on loopback.

- A reply that ended incomplete has Continue: a steering message and the limit that stopped it,
  prefilled with its value doubled; the run goes on in place (``POST /runs/{id}/continue/
  stream``) and its reply streams into the same reply: the same run id, its next attempt.
- A run's timeline has the same Continue, which goes on in the run's conversation; a refusal
  (409: the run is no longer incomplete) is said in plain words where it was asked.
- Only the run's owner: another principal neither sees the run nor continues it.

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS
from playwright.sync_api import expect
from portal_support import (
    add_agents,
    add_counter,
    advanced_config,
    browser_page,
    page_errors,
    soulacy_serve,
)

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)


def auth(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[who]}"}


def counted(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_an_incomplete_reply_continues_in_place_with_a_raised_turn_limit_and_only_its_owners(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    calls = add_counter(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=counter")
        page.get_by_role("textbox", name="Message").fill("count to two")
        page.get_by_role("button", name="Send").click()
        reply = page.locator("article.assistant").first
        page.locator("article.assistant[data-status='incomplete']").wait_for()
        run_id = reply.get_attribute("data-run-id")
        assert (
            reply.locator(".notice")
            .inner_text()
            .startswith("Incomplete: the turn limit was reached (max_turns)")
        )
        assert counted(calls) == ["1"]

        # Bob neither sees alice's run nor continues it, on either route, nor in his portal.
        for path in ("continue", "continue/stream"):
            refused = httpx.post(
                f"{url}/api/v1/runs/{run_id}/{path}",
                json={"overrides": {"max_turns": 5}},
                headers=auth("bob"),
                timeout=30,
            )
            assert refused.status_code == 404, refused.text
        bob = browser_page(browser, KEYS["bob"])
        bob.goto(f"{url}/#/runs/{run_id}")
        assert "no run" in bob.get_by_role("alert").inner_text()
        assert bob.get_by_role("button", name="Continue").count() == 0
        bob.context.close()

        # A second tab holds the timeline's Continue form open, to be refused later.
        other = browser_page(browser, KEYS["alice"])
        other.goto(f"{url}/#/runs/{run_id}")
        other.get_by_role("button", name="Continue", exact=True).click()
        assert other.get_by_label("Turn limit (max_turns)").input_value() == "2"

        # So does the reply in a browser that reads the conversation from durable history
        # only: the limit that stopped it comes from the run's timeline.
        session = page.locator(".session").inner_text().removeprefix("session ")
        elsewhere = browser_page(browser, KEYS["alice"])
        elsewhere.goto(f"{url}/#/chat?session={session}")
        elsewhere.get_by_role("button", name="Continue", exact=True).click()
        # the prefill, once the timeline said the limits (a locator's wait: the portal's CSP
        # refuses the string evaluation a predicate of wait_for_function needs while it polls)
        expect(elsewhere.locator("input[name=max_turns]")).to_have_value("2")

        # Continue from the chat: the form opens focused, the limit that stopped it doubled.
        reply.get_by_role("button", name="Continue", exact=True).click()
        form = page.get_by_role("form", name=f"Continue run {run_id[:12]}")
        steer = form.get_by_label("Message to steer it (optional)")
        assert page.evaluate("document.activeElement.id") == steer.get_attribute("id")
        turns = form.get_by_label("Turn limit (max_turns)")
        assert turns.input_value() == "2"  # max_turns 1, doubled
        assert "now 1" in form.inner_text()
        steer.fill("please finish")
        page.evaluate("document.getElementById('toast').hidden = true")
        page.screenshot(path=str(screenshots / "chat-continue.png"))
        form.get_by_role("button", name="Continue the run").click()

        done = page.locator(f"article.assistant[data-run-id='{run_id}'][data-status='completed']")
        done.wait_for()
        assert done.get_attribute("data-attempt") == "2"
        assert page.locator("article.assistant").count() == 1  # the same reply, in place
        assert done.locator(":scope > .text").inner_text() == "counted to two"
        assert done.locator(".attempt").inner_text().split("\n\n") == [
            "Attempt 1 · Incomplete: the turn limit was reached (max_turns)",
            "You: please finish",
        ]
        assert "turns: 2 (request)" in done.inner_text()
        assert "attempt 2" in done.inner_text()
        assert done.get_by_role("button", name="Continue", exact=True).count() == 0
        assert counted(calls) == ["1", "2"]  # the first call was not made again

        stored = httpx.get(f"{url}/api/v1/runs/{run_id}", headers=auth("alice"), timeout=30)
        assert (stored.json()["status"], stored.json()["attempt"]) == ("completed", 2)
        assert stored.json()["session_id"] == session
        history = httpx.get(f"{url}/api/v1/history/{session}", headers=auth("alice"), timeout=30)
        users = [e["content"] for e in history.json()["entries"] if e["role"] == "user"]
        assert users == ["count to two", "please finish"]

        # The other browser's form is refused (409), said in plain words; its reply is then
        # brought up to date from history.
        elsewhere.get_by_role("button", name="Continue the run").click()
        elsewhere.locator("#toast", has_text="Not continued: run").wait_for()
        ended = elsewhere.locator(f"article[data-run-id='{run_id}'][data-status='completed']")
        ended.wait_for()
        assert ended.locator(":scope > .text").inner_text() == "counted to two"
        assert page_errors(elsewhere, allowed=("409",)) == []
        elsewhere.context.close()

        # Kept through a reload (local storage, merged with history).
        page.reload()
        again = page.locator(f"article.assistant[data-run-id='{run_id}'][data-status='completed']")
        again.wait_for()
        assert again.get_attribute("data-attempt") == "2"
        assert again.locator(":scope > .text").inner_text() == "counted to two"

        # The other tab's form is refused now, in plain words, and stays usable.
        other.get_by_role("button", name="Continue the run").click()
        alert = other.get_by_role("alert")
        alert.wait_for()
        assert alert.inner_text() == (
            f"Not continued: run '{run_id}' is completed:"
            " only a run that ended incomplete continues."
        )
        assert other.get_by_role("button", name="Continue the run").is_enabled()
        assert page_errors(page) == []
        assert page_errors(other, allowed=("409",)) == []
        other.context.close()
        page.context.close()


def test_a_runs_timeline_continues_it_in_its_conversation(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    calls = add_counter(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=counter")
        page.get_by_role("textbox", name="Message").fill("count to two")
        page.get_by_role("button", name="Send").click()
        reply = page.locator("article.assistant[data-status='incomplete']")
        reply.wait_for()
        run_id = reply.get_attribute("data-run-id")
        reply.get_by_role("link", name="Timeline of this run").click()
        page.locator("ol.timeline > li[data-kind='ended']").wait_for()

        page.get_by_role("button", name="Continue", exact=True).click()
        turns = page.get_by_label("Turn limit (max_turns)")
        assert turns.input_value() == "2"
        assert page.evaluate("document.activeElement.name") == "text"
        turns.fill("4")
        page.get_by_role("button", name="Continue the run").click()

        # On to the run's conversation, where the continued reply streams to its end.
        done = page.locator(f"article.assistant[data-run-id='{run_id}'][data-status='completed']")
        done.wait_for()
        assert "#/chat?session=" in page.url
        assert done.get_attribute("data-attempt") == "2"
        assert done.locator(":scope > .text").inner_text() == "counted to two"
        assert "turns: 4 (request)" in done.inner_text()
        assert page.evaluate("document.activeElement.dataset.runId") == run_id
        assert counted(calls) == ["1", "2"]

        # The timeline keeps both attempts, and has no Continue for a completed run.
        done.get_by_role("link", name="Timeline of this run").click()
        page.locator("ol.timeline > li[data-kind='ended']").nth(1).wait_for()
        steps = [" ".join(t.split()) for t in page.locator("ol.timeline > li").all_inner_texts()]
        assert steps[0] == "Started (agent counter) count to two"  # with what was asked
        assert any(s.startswith("Attempt 2 started (agent counter)") for s in steps)
        assert steps[-1].startswith("Ended · Completed")
        assert page.get_by_role("button", name="Continue", exact=True).count() == 0
        assert page_errors(page) == []
        page.context.close()
