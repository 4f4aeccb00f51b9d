"""Conversations on the server, message actions and costs against budgets, in a real browser
(issue 39): Debian's Chromium driven by Playwright, against a real ``soulacy serve`` on
loopback.

- The list of conversations is the server's: a fresh browser of the same key lists them,
  searches, renames and deletes them with the keyboard; another principal sees none of them
  and cannot open them; a conversation with a run going on is not deleted (409, said).
- Each message has actions: Copy; a reply, Retry (its request again as a new run); the
  person's own, Edit and resend — all from the keyboard.
- Today's spend against the daily budget is in the chat's header and on Runs; each model
  call of a run's timeline says its price.

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS
from playwright.sync_api import expect
from portal_support import add_agents, advanced_config, browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
ASKED_404 = ("Failed to load resource",)  # a conversation asked for that this key does not have


def say(page: Any, text: str, replies: int) -> None:
    """Send ``text`` with the keyboard; wait until ``replies`` replies have ended."""
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")
    page.locator("article.assistant[data-status='completed']").nth(replies - 1).wait_for()


def items(page: Any) -> list[str]:
    return page.locator(".conversation-list li > a").all_inner_texts()


def test_conversations_are_the_servers_searched_renamed_and_deleted_from_any_browser(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        first = browser_page(browser, KEYS["alice"])
        first.goto(url + "/#/chat?agent=echo")
        say(first, "plan the garden", 1)
        garden = first.locator(".session").inner_text().removeprefix("session ")
        first.get_by_role("button", name="New conversation").click()
        say(first, "taxes for 2026", 1)
        taxes = first.locator(".session").inner_text().removeprefix("session ")
        first.locator(".conversation-list li > a", has_text="plan the garden").wait_for()

        # Another browser of the same key (a phone): the same list, from the server.
        other = browser_page(browser, KEYS["alice"], width=390, height=800)
        other.goto(url + "/#/chat")
        other.locator(".conversation-list li > a", has_text="plan the garden").wait_for()
        assert items(other) == ["taxes for 2026", "plan the garden"]  # newest first
        assert "echo" in other.locator(f"li[data-session-id='{garden}'] .conv-meta").inner_text()

        # Search.
        other.get_by_role("searchbox", name="Search conversations").fill("GARDEN")
        other.locator(".conversation-list li > a", has_text="taxes").wait_for(state="detached")
        assert items(other) == ["plan the garden"]
        other.get_by_role("searchbox", name="Search conversations").fill("nothing like it")
        other.locator("#conv-none", has_text="No conversation matches.").wait_for()
        other.get_by_role("searchbox", name="Search conversations").fill("")
        other.locator(".conversation-list li > a", has_text="taxes").wait_for()

        # Rename, with the keyboard.
        other.get_by_role("button", name="Rename the conversation plan the garden").focus()
        other.keyboard.press("Enter")
        title = other.get_by_role("textbox", name="New title (empty: its first message)")
        assert title.evaluate("el => el === document.activeElement")
        other.keyboard.type("Garden plans")
        other.keyboard.press("Enter")
        other.locator(".conversation-list li > a", has_text="Garden plans").wait_for()
        focused = other.evaluate("document.activeElement.textContent")
        assert focused == "Garden plans"  # the keyboard is on the renamed conversation

        # Delete, with the keyboard: asked first.
        other.get_by_role("button", name="Delete the conversation taxes for 2026").focus()
        other.keyboard.press("Enter")
        keep = other.get_by_role("button", name="Keep")
        assert keep.evaluate("el => el === document.activeElement")  # the safe answer first
        other.locator(".conversations").screenshot(
            path=str(screenshots / "chat-conversations-390.png")
        )
        other.get_by_role("button", name="Delete the conversation taxes for 2026").press("Enter")
        other.locator("#toast", has_text="Conversation deleted").wait_for()
        other.locator(".conversation-list li > a", has_text="taxes").wait_for(state="detached")
        assert items(other) == ["Garden plans"]

        # The first browser, reloaded: the new title; the deleted conversation is gone and
        # does not open.
        first.reload()
        first.locator(".conversation-list li > a", has_text="Garden plans").wait_for()
        assert items(first) == ["Garden plans"]
        first.goto(url + f"/#/chat?session={taxes}")
        first.locator("#toast", has_text=f"No stored conversation {taxes}").wait_for()
        assert first.locator(".msg.user", has_text="taxes for 2026").count() == 0

        # Bob: none of alice's, and hers do not open for him.
        bob = browser_page(browser, KEYS["bob"])
        bob.goto(url + f"/#/chat?session={garden}")
        bob.locator("#toast", has_text="No stored conversation").wait_for()
        bob.locator("#conv-none", has_text="No conversations yet.").wait_for()
        assert "garden" not in bob.content().lower()
        assert page_errors(first, ASKED_404) == []
        assert page_errors(other) == []
        assert page_errors(bob, ASKED_404) == []
        for page in (first, other, bob):
            page.context.close()


def test_a_conversation_with_a_run_going_on_is_not_deleted(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)  # "slow" answers after 30 s: cancelled here long before
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=slow")
        page.get_by_role("textbox", name="Message").fill("take your time")
        page.get_by_role("button", name="Send").click()
        running = page.locator("article.assistant[data-status='running']")
        running.locator("button", has_text="Cancel").wait_for()
        page.reload()  # listed by the server now, running
        row = page.locator(".conversation-list li[data-status='running']")
        row.wait_for()
        row.get_by_role("button", name="Delete the conversation take your time").click()
        page.get_by_role("button", name="Delete the conversation take your time").click()
        page.locator("#toast", has_text="a run of this conversation is going on").wait_for()
        assert items(page) == ["take your time"]
        page.locator("article.assistant button", has_text="Cancel").click()
        page.locator("article.assistant[data-status='cancelled']").wait_for()
        assert page_errors(page, ("409",)) == []
        page.context.close()


def test_a_copy_still_says_copied_when_the_conversation_is_redrawn(
    workspace: Workspace, browser: Any
) -> None:
    """A run's end redraws the conversation once the list and today's spend are read; a Copy
    pressed before that redraw said "Copied" on a button the redraw threw away (a CI flake of
    the test below). The page's clock is paused, so the two seconds cannot pass meanwhile."""
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page.clock.install()
        page.goto(url + "/#/chat?agent=echo")
        page.get_by_role("textbox", name="Message").wait_for()
        held: list[Any] = []  # the run's end asks for today's spend: held until the copy
        page.route("**/api/v1/costs/today", lambda route: held.append(route))
        say(page, "first question", 1)
        page.clock.pause_at(page.evaluate("Date.now()") + 1000)
        for name in ("Copy the reply", "Copy your message"):
            page.get_by_role("button", name=name).press("Enter")
            expect(page.get_by_role("button", name=name)).to_have_text("Copied")
        page.evaluate("document.querySelectorAll('article').forEach((a) => a.dataset.old = 'yes')")
        assert held, "the run's end asked for today's spend"
        for route in held:
            route.continue_()
        page.unroute("**/api/v1/costs/today")
        expect(page.locator("article[data-old]")).to_have_count(0)  # redrawn
        for name in ("Copy the reply", "Copy your message"):
            expect(page.get_by_role("button", name=name)).to_have_text("Copied")
        page.get_by_role("button", name="Copy the reply").press("Enter")  # again, redrawn
        page.clock.run_for(2500)
        for name in ("Copy the reply", "Copy your message"):
            expect(page.get_by_role("button", name=name)).to_have_text("Copy")
        assert page_errors(page) == []
        page.context.close()


def test_copy_retry_and_edit_and_resend_each_message_with_the_keyboard(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page.goto(url + "/#/chat?agent=echo")
        say(page, "first question", 1)
        session = page.locator(".session").inner_text().removeprefix("session ")

        # Copy a reply, and one's own message.
        page.get_by_role("button", name="Copy the reply").focus()
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Copy the reply").filter(has_text="Copied").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == "hello there"
        page.get_by_role("button", name="Copy your message").press("Enter")
        page.get_by_role("button", name="Copy your message").filter(has_text="Copied").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == "first question"

        # Retry: the same request, as a new run of the conversation.
        first_run = page.locator("article.assistant").first.get_attribute("data-run-id")
        page.get_by_role("button", name="Retry: ask the same again, as a new run").press("Enter")
        page.locator("article.assistant[data-status='completed']").nth(1).wait_for()
        second_run = page.locator("article.assistant").nth(1).get_attribute("data-run-id")
        assert second_run != first_run
        assert page.locator(".msg.user .text").all_inner_texts() == [
            "first question",
            "first question",
        ]

        # Edit and resend: the message, changed, as a new run; Escape leaves it as it was.
        edit = page.get_by_role("button", name="Edit your message and ask again").first
        edit.press("Enter")
        box = page.get_by_role("textbox", name="Edit your message")
        assert box.input_value() == "first question"
        box.press("Escape")
        box.wait_for(state="detached")
        assert page.evaluate("document.activeElement.textContent") == "Edit"
        page.keyboard.press("Enter")
        box = page.get_by_role("textbox", name="Edit your message")
        box.fill("second question")
        page.screenshot(path=str(screenshots / "chat-message-actions.png"))
        box.press("Enter")
        page.locator("article.assistant[data-status='completed']").nth(2).wait_for()
        assert page.locator(".msg.user .text").all_inner_texts() == [
            "first question",
            "first question",
            "second question",
        ]
        assert page.evaluate("document.activeElement.id") == "chat-text"
        assert page_errors(page) == []
        page.context.close()

        # Each is a run of the same conversation on the server.
        history = httpx.get(
            f"{url}/api/v1/history/{session}",
            headers={"Authorization": f"Bearer {KEYS['alice']}"},
        ).json()["entries"]
        asked = [e["content"] for e in history if e["role"] == "user"]
        assert asked == ["first question", "first question", "second question"]
        assert len({e["run_id"] for e in history}) == 3


def test_todays_spend_against_the_daily_budget_in_chat_runs_and_each_model_call(
    workspace: Workspace, browser: Any, screenshots: Path
) -> None:
    config = advanced_config().replace(
        "    - {provider: local,",
        '    - {provider: scripted, model: "*", input_per_mtok: 2.0, output_per_mtok: 10.0}\n'
        "    - {provider: local,",
    )
    workspace.write_config(config)
    workspace.scripted_agent(
        "priced", [{"text": "done", "usage": {"input": 1_000_000, "output": 100_000}}], repeat=True
    )
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, KEYS["alice"])
        page.goto(url + "/#/chat?agent=priced")
        say(page, "spend something", 1)  # $2 in + $1 out
        budget = "Today $3.00 of the $40.00 daily budget (8%)"
        page.locator("#chat-budget", has_text=budget).wait_for()

        page.get_by_role("link", name="Timeline of this run").click()
        call = page.locator(".timeline li", has_text="model replied")
        call.first.wait_for()
        assert "cost $3.00" in call.first.inner_text()
        assert "scripted/" in call.first.inner_text()

        page.get_by_role("link", name="Runs", exact=True).click()
        today = page.locator("section.today")
        today.locator(".spend-row", has_text="Daily budget (everyone)").wait_for()
        text = today.inner_text()
        assert "$3.00 of $40.00 (8%)" in text, text
        assert "Your runs today (alice)" in text
        assert "$3.00 · 1 run · 1,100,000 tokens" in text, text
        assert "Token quota (tokens_per_hour)" in text
        meter = today.get_by_role("meter", name="Daily budget (everyone): $3.00 of $40.00 (8%)")
        assert meter.get_attribute("value") == "3"
        page.screenshot(path=str(screenshots / "runs-today.png"))
        assert page_errors(page) == []
        page.context.close()
