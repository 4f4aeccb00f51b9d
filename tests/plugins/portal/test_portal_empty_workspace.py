"""A new user's empty workspace in the portal, in a real browser (issue 39, observation 6):
Debian's Chromium driven by Playwright, against a real ``soulacy serve`` on loopback.

- Creating an agent with no workspace provider set says so and offers the choices; nothing is
  written.
- Choosing ``scripted`` works: the agent gets a script of its own and its first chat answers.
- An agent written by hand without a provider fails its chat with a clear message and a way to
  the editor, never a raw ``UsageError``; choosing ``scripted`` there works too.

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

from typing import Any

import pytest
from _support.http_server import CHROMIUM
from portal_support import browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)


def test_on_an_empty_workspace_a_new_agent_asks_for_a_provider_and_scripted_answers(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, None)  # keyless loopback mode
        page.goto(url + "/#/agents")
        page.get_by_label("Agent id").fill("first")
        page.get_by_role("button", name="Create agent").click()
        status = page.locator(".new-agent .save-status", has_text="Not created")
        status.wait_for()
        assert "no workspace provider is set" in status.inner_text()
        assert "scripted" in status.inner_text()
        assert not (workspace.path / "agents" / "first").exists()

        page.get_by_label("Provider", exact=True).fill("scripted")
        page.get_by_role("button", name="Create agent").click()
        page.get_by_role("heading", name="first", exact=True).wait_for()
        page.get_by_role("link", name="Chat with it").click()
        page.get_by_role("textbox", name="Message").fill("hello")
        page.get_by_role("button", name="Send").click()
        done = page.locator("article.assistant[data-status='completed']")
        done.wait_for()
        assert "I am first, on the scripted model" in done.inner_text()
        assert page_errors(page, ("Failed to load resource",)) == []  # the 422 asked
        page.context.close()
    soul = (workspace.path / "agents" / "first" / "SOUL.yaml").read_text()
    assert "provider: scripted" in soul
    assert "model: agents/first/script.yaml" in soul


def test_a_chat_of_an_agent_without_a_provider_fails_with_a_clear_message(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    workspace.write_agent("bare", "name: Bare\n")  # by hand: no provider anywhere
    with soulacy_serve(workspace.path) as (url, _):
        page = browser_page(browser, None)
        page.goto(url + "/#/chat?agent=bare")
        page.get_by_role("textbox", name="Message").fill("hello")
        page.get_by_role("button", name="Send").click()
        reply = page.locator(
            "article.assistant[data-status='failed'], article.assistant[data-status='refused']"
        )
        reply.wait_for()
        text = reply.inner_text()
        assert "UsageError" not in text
        assert "has no provider" in text, text
        link = reply.get_by_role("link", name="Choose its provider")
        assert link.get_attribute("href") == "#/agents/bare"

        # Choosing `scripted` in its editor works: it gets a script of its own.
        link.click()
        page.get_by_label("Provider", exact=True).fill("scripted")
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved: llm.provider, llm.model").wait_for()
        page.get_by_role("link", name="Chat with it").click()
        page.get_by_role("textbox", name="Message").fill("hello again")
        page.get_by_role("button", name="Send").click()
        done = page.locator("article.assistant[data-status='completed']")
        done.wait_for()
        assert "I am bare, on the scripted model" in done.inner_text()
        page.context.close()
    assert (workspace.path / "agents" / "bare" / "script.yaml").is_file()
