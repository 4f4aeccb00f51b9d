"""The Chat page and human approval of tool calls (docs/approvals.md), in Debian's Chromium
driven by Playwright, against a real ``soulacy serve`` on loopback: a call of a tool listed in
``confirm_tools`` shows a notice with Approve and Deny, the decision goes to
``POST /api/v1/chat/confirm``, and the notice shows it when the stream says it.

The screenshot is saved to $SOULACY_PORTAL_SCREENSHOTS (docs/portal.md shows it), or to the
test's temporary folder. Without a browser the test skips, saying why.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.http_server import CHROMIUM, KEYS, keyed_config
from playwright.sync_api import expect
from portal_support import soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
TIMEOUT = 30_000  # ms

TOOLS_PY = '''
from pathlib import Path


def delete(path: str) -> str:
    """Delete a file (only notes that it ran)."""
    with (Path(__file__).parent / "ran.txt").open("a") as fh:
        fh.write(f"delete {path}\\n")
    return f"deleted {path}"
'''


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SOULACY_PORTAL_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def cleaner(workspace: Workspace) -> Path:
    """An agent whose every run calls ``delete`` (call id c1: the same in every run), which
    waits for approval, then answers."""
    workspace.write_config(keyed_config())
    workspace.scripted_agent(
        "cleaner",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        repeat=True,
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
    )
    (workspace.path / "agents" / "cleaner" / "tools.py").write_text(TOOLS_PY)
    return workspace.path / "agents" / "cleaner" / "ran.txt"


def ran(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_waiting_call_is_approved_or_denied_from_the_chat_and_each_notice_keeps_its_own(
    workspace: Workspace, browser: Any, shots: Path
) -> None:
    ran_file = cleaner(workspace)
    with soulacy_serve(workspace.path) as (url, _):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(
            f"sessionStorage.setItem('soulacy-key', {json.dumps(KEYS['alice'])})"
        )
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        confirms: list[dict[str, Any]] = []
        page.on(
            "request",
            lambda r: (
                confirms.append(json.loads(r.post_data or "null"))
                if r.url.endswith("/api/v1/chat/confirm")
                else None
            ),
        )
        page.goto(url + "/#/chat")
        page.locator("#chat-agent").select_option("cleaner")

        # 1. The call waits; its notice says which tool, with what, and why.
        page.get_by_role("textbox", name="Message").fill("delete a.txt")
        page.get_by_role("button", name="Send").click()
        first = page.locator("article.assistant").nth(0)
        approve = first.get_by_role("button", name="Approve the call of delete (c1)")
        approve.wait_for()
        notice = first.locator(".approval[data-call-id='c1']")
        assert notice.get_attribute("data-status") == "pending"
        assert page.get_by_role("group", name="Approval needed: delete").count() == 1
        assert notice.locator(".approval-args").inner_text() == '{"path":"a.txt"}'
        assert notice.locator(".approval-why").inner_text() == "Why: confirm_tools lists 'delete'"
        assert "Waiting for your approval" in notice.locator(".approval-state").inner_text()
        assert first.get_attribute("data-status") == "running"
        assert ran(ran_file) == []  # nothing ran yet
        approve.click()

        # The stream's tool.approval (approved) shows the decision; the run goes on to its end.
        page.locator("article.assistant[data-status='completed']").wait_for()
        assert notice.get_attribute("data-status") == "approved"
        assert notice.locator(".approval-state").inner_text() == "Approved by alice"
        assert notice.get_by_role("button").count() == 0
        assert first.locator(".text").inner_text() == "finished"
        assert ran(ran_file) == ["delete a.txt"]

        # 2. Another run of the same conversation asks for its own call c1 (the same call id).
        page.get_by_role("textbox", name="Message").fill("and again")
        page.get_by_role("button", name="Send").click()
        second = page.locator("article.assistant").nth(1)
        deny = second.get_by_role("button", name="Deny the call of delete (c1)")
        deny.wait_for()
        assert notice.get_attribute("data-status") == "approved"  # the first run's stays
        page.evaluate("document.getElementById('toast').hidden = true")
        page.screenshot(path=str(shots / "chat-approval.png"))
        deny.focus()  # by keyboard this time
        page.keyboard.press("Enter")
        page.locator("article.assistant[data-status='completed']").nth(1).wait_for()
        denied = second.locator(".approval[data-call-id='c1']")
        assert denied.get_attribute("data-status") == "denied"
        assert denied.locator(".approval-state").inner_text() == (
            "Denied by alice; the call did not run"
        )
        assert notice.get_attribute("data-status") == "approved"
        assert ran(ran_file) == ["delete a.txt"]  # the denied call did not run
        session = page.locator(".session").inner_text().removeprefix("session ")
        runs = [a.get_attribute("data-run-id") for a in page.locator("article.assistant").all()]
        assert confirms == [
            {"run_id": runs[0], "call_id": "c1", "approved": True},
            {"run_id": runs[1], "call_id": "c1", "approved": False},
        ]

        # The decisions are kept through a reload, each on its own reply.
        page.reload()
        page.locator("article.assistant[data-status='completed']").nth(1).wait_for()
        shown = page.locator(".approval .approval-state").all_inner_texts()
        assert shown == ["Approved by alice", "Denied by alice; the call did not run"]
        assert errors == []
        context.close()

        # What the model was told of the denied call (the scripted model does not read it).
        headers = {"Authorization": f"Bearer {KEYS['alice']}"}
        history = httpx.get(f"{url}/api/v1/history/{session}", headers=headers, timeout=30)
        tools = [e["content"] for e in history.json()["entries"] if e["role"] == "tool"]
        assert tools == [
            "deleted a.txt",
            "error: the call of tool 'delete' was denied by alice; it did not run",
        ]


def test_a_call_whose_run_was_suspended_is_still_decided_from_its_notice_and_the_run_goes_on(
    workspace: Workspace, browser: Any
) -> None:
    """Past ``approvals.suspend_after`` the waiting run gives back its task and reads
    ``interrupted (awaiting_approval)`` (docs/approvals.md#suspended-waits): its notice still
    has Approve and Deny, and the decision resumes the run, which the reply then follows."""
    ran_file = cleaner(workspace)
    workspace.write_config(keyed_config("approvals:\n  suspend_after: 1s\n"))
    with soulacy_serve(workspace.path) as (url, _):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_init_script(
            f"sessionStorage.setItem('soulacy-key', {json.dumps(KEYS['alice'])})"
        )
        page = context.new_page()
        page.set_default_timeout(TIMEOUT)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/#/chat")
        page.locator("#chat-agent").select_option("cleaner")
        page.get_by_role("textbox", name="Message").fill("delete a.txt")
        page.get_by_role("button", name="Send").click()
        reply = page.locator("article.assistant").nth(0)
        expect(reply).to_have_attribute("data-status", "interrupted")  # suspended
        notice = reply.locator(".approval[data-call-id='c1']")
        expect(notice).to_have_attribute("data-status", "pending")
        approve = reply.get_by_role("button", name="Approve the call of delete (c1)")
        expect(approve).to_be_enabled()
        assert ran(ran_file) == []
        approve.click()

        expect(reply).to_have_attribute("data-status", "completed")
        expect(notice).to_have_attribute("data-status", "approved")
        expect(reply.locator(".text")).to_have_text("finished")
        assert ran(ran_file) == ["delete a.txt"]
        assert errors == []
        context.close()
