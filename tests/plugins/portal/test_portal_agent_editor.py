"""The agent editor and the chat composer in a real browser (issue 39, observations 1-3):
Debian's Chromium driven by Playwright, against a real ``soulacy serve`` on loopback.

- The editor counts and sends only what the person changed: an agent created with only a name,
  or written by the original system with Go's ``""`` values, opens with no unsaved changes, and
  an edit of one field sends that field alone and changes that line of SOUL.yaml alone.
- Permissions shows ``confirm_tools`` as what it is, active (the approvals plugin implements
  it), and edits it: the next run's call of the listed tool waits for approval.
- After a message is sent with Enter, the keyboard stays in the message box.

Without a browser these tests skip, saying why.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import pytest
from _support.http_server import CHROMIUM, KEYS
from portal_support import add_agents, advanced_config, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
TIMEOUT = 30_000  # ms

# An agent as the original system's editor saved it: every unset string written as Go's "",
# tools in the original's own form, a tool whose calls wait for a person.
ORIGINAL_SOUL = """\
id: helper
name: Helper
description: ""
version: ""
system_prompt: You find sources and summarise them.
llm:
  provider: ""
  model: ""
  tool_choice: ""
tools:
  - name: word_count
    inline: "print(len(input().split()))"
reasoning:
  strategy: ""
max_turns: 12
budget:
  max_tokens: 40000
  max_llm_calls: 8
enabled: true
confirm_tools: [delete_file]
"""

TOOLS_PY = '''
def delete(path: str) -> str:
    """Delete a file (only says it did)."""
    return f"deleted {path}"


def archive(path: str) -> str:
    """Archive a file (only says it did)."""
    return f"archived {path}"
'''


def page_with_key(browser: Any, key: str | None) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    if key:
        context.add_init_script(f"sessionStorage.setItem('soulacy-key', {json.dumps(key)})")
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.errors = errors  # type: ignore[attr-defined]
    return page


def agent_patches(page: Any) -> list[Any]:
    """The bodies of the page's ``PATCH /api/v1/agents/...`` requests, as they are sent."""
    sent: list[Any] = []
    page.on(
        "request",
        lambda r: (
            sent.append(r.post_data_json)
            if r.method == "PATCH" and "/api/v1/agents/" in r.url
            else None
        ),
    )
    return sent


def no_page_errors(page: Any, allowed: tuple[str, ...] = ()) -> None:
    found = [e for e in page.errors if not any(a in e for a in allowed)]
    assert found == [], found


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def pending(page: Any) -> str:
    return str(page.locator(".pending").inner_text())


def open_editor(page: Any, url: str, agent_id: str) -> None:
    page.goto(f"{url}/#/agents/{agent_id}")
    page.get_by_role("heading", name="Purpose", exact=True).wait_for()


# -- observation 1: only what the person changed -----------------------------------------------


def test_an_agent_created_with_only_a_name_opens_unchanged_and_saves_only_its_new_name(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    add_agents(workspace)
    soul = workspace.path / "agents" / "bot" / "SOUL.yaml"
    with soulacy_serve(workspace.path) as (url, _):
        root = page_with_key(browser, KEYS["root"])
        sent = agent_patches(root)
        root.goto(url + "/#/agents")
        root.get_by_label("Agent id").fill("bot")
        root.get_by_label("Name", exact=True).fill("Bot")
        root.get_by_role("button", name="Create agent").click()
        root.get_by_role("heading", name="Bot", exact=True).wait_for()
        created = soul.read_text()
        assert "description: ''" in created
        assert pending(root) == "No unsaved changes"
        assert root.get_by_role("button", name="Save agent").is_disabled()

        root.get_by_label("Name", exact=True).fill("Bot Two")
        assert pending(root) == "1 unsaved change"
        root.get_by_role("button", name="Save agent").click()
        root.locator(".save-status", has_text="Saved: name").wait_for()
        assert sent == [{"changes": {"name": "Bot Two"}}]
        assert changed_lines(created, soul.read_text()) == ["-name: Bot", "+name: Bot Two"]
        assert pending(root) == "No unsaved changes"

        # An agent edit is an admin's: another principal is refused, as before.
        alice = page_with_key(browser, KEYS["alice"])
        alice.goto(url + "/#/agents/bot")
        alice.get_by_text("Editing agents needs an admin").wait_for()
        assert alice.locator("form.editor").count() == 0
        no_page_errors(root)
        no_page_errors(alice, allowed=("Failed to load resource",))  # the 403 asked
        root.context.close()
        alice.context.close()
    assert "description: ''" in soul.read_text()


def test_an_agent_of_the_original_system_opens_unchanged_and_a_prompt_edit_keeps_its_llm_block(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    workspace.write_agent("helper", ORIGINAL_SOUL)
    soul = workspace.path / "agents" / "helper" / "SOUL.yaml"
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, KEYS["root"])
        sent = agent_patches(page)
        open_editor(page, url, "helper")
        assert pending(page) == "No unsaved changes"
        page.get_by_role("button", name="Advanced").click()  # every field of the agent shown
        assert pending(page) == "No unsaved changes"
        page.get_by_role("button", name="Everyday").click()

        page.get_by_label("System prompt", exact=True).fill("You find sources and cite them.")
        assert pending(page) == "1 unsaved change"
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved: system_prompt").wait_for()
        assert sent == [{"changes": {"system_prompt": "You find sources and cite them."}}]
        assert pending(page) == "No unsaved changes"
        no_page_errors(page)
        page.context.close()
    assert changed_lines(ORIGINAL_SOUL, soul.read_text()) == [
        "-system_prompt: You find sources and summarise them.",
        "+system_prompt: You find sources and cite them.",
    ]


# -- observation 2: confirm_tools is active and edited in Permissions --------------------------


def test_permissions_show_confirm_tools_as_active_and_an_edit_makes_the_next_call_wait(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config(advanced_config())
    workspace.scripted_agent(
        "cleaner",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        repeat=True,
    )
    (workspace.path / "agents" / "cleaner" / "tools.py").write_text(TOOLS_PY)
    soul = workspace.write_agent(
        "cleaner",
        "# Cleaner: tidies the folder.\n"
        "name: Cleaner\n"
        "llm: {provider: scripted, model: agents/cleaner/script.yaml}\n"
        "tools: [tools.py:delete, tools.py:archive]\n"
        "confirm_tools: [archive]   # from the original system\n",
    )
    before = soul.read_text()
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, KEYS["root"])
        sent = agent_patches(page)
        open_editor(page, url, "cleaner")
        permissions = page.get_by_role("region", name="Permissions")
        field = permissions.get_by_label("Tools that wait for approval")
        assert field.input_value() == "archive"
        assert field.is_editable()
        assert permissions.locator(".kept").count() == 0  # not among keys with no effect
        assert pending(page) == "No unsaved changes"

        field.fill("delete")
        assert pending(page) == "1 unsaved change"
        page.get_by_role("button", name="Save agent").click()
        page.locator(".save-status", has_text="Saved: confirm_tools").wait_for()
        assert sent == [{"changes": {"confirm_tools": ["delete"]}}]
        assert changed_lines(before, soul.read_text()) == [
            "-confirm_tools: [archive]   # from the original system",
            "+confirm_tools: [delete]    # from the original system",
        ]

        # It has an effect: the next run's call of `delete` waits for a person.
        page.goto(url + "/#/chat?agent=cleaner")
        page.get_by_role("textbox", name="Message").fill("tidy up")
        page.get_by_role("button", name="Send").click()
        page.locator(".approval[data-status='pending']").wait_for()
        assert "Approval needed: delete" in page.locator(".approval").inner_text()
        page.get_by_role("button", name="Deny the call of delete (c1)").click()
        page.locator("article.assistant[data-status='completed']").wait_for()
        no_page_errors(page)  # (a new conversation asks for no history: no 404)
        page.context.close()


# -- observation 3: the keyboard stays in the message box --------------------------------------


def test_after_sending_with_enter_the_next_message_is_typed_into_the_message_box(
    workspace: Workspace, browser: Any
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    with soulacy_serve(workspace.path) as (url, _):
        page = page_with_key(browser, None)
        page.goto(url + "/#/chat")
        box = page.get_by_role("textbox", name="Message")
        box.click()
        page.keyboard.type("first message")
        page.keyboard.press("Enter")
        page.locator("article.assistant[data-status='completed']").wait_for()
        assert page.evaluate("document.activeElement.id") == "chat-text"
        page.keyboard.type("second message")  # no click: where the keyboard already is
        page.keyboard.press("Enter")
        page.locator(".msg.user", has_text="second message").wait_for()
        page.locator("article.assistant[data-status='completed']").nth(1).wait_for()
        assert page.evaluate("document.activeElement.id") == "chat-text"
        assert box.input_value() == ""
        no_page_errors(page)
        page.context.close()
