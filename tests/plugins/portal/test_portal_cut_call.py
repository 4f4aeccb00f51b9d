"""The Chat page and a call the effect ledger found cut (docs/running.md#the-effect-ledger), in
Debian's Chromium driven by Playwright, against real ``soulacy serve`` processes: the server is
killed (SIGKILL) after the tool's effect and before its result was stored; the run's same-id
retry on the next server waits for a person on ``cut:c1``, and the notice takes the call's
result: "It happened" sends it (``POST /api/v1/chat/confirm`` with ``result``), the call is not
run again and the model gets the result (docs/decisions/0081)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.effect_ledger import TOOLS_PY, pending, sqlite_query
from _support.http_server import CHROMIUM, KEYS, keyed_config
from _support.serve_nodes import free_port
from playwright.sync_api import expect
from portal_support import browser_page, page_errors, soulacy_serve

from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM} (.ci/run installs it)"
)
SAID = "sent to bob: message 42 is in the mail log"
ALICE = {"Authorization": f"Bearer {KEYS['alice']}"}


def sender(workspace: Workspace, port: int) -> Path:
    """An agent whose run calls ``send`` (unsafe, the default), which holds after its effect
    while the file ``hold`` exists; both servers listen on ``port`` (one origin for the page)."""
    config = keyed_config("leases:\n  cancel_poll: 200ms\n").replace("port: 0", f"port: {port}")
    workspace.write_config(config)
    workspace.scripted_agent(
        "sender",
        [{"tool": "send", "arguments": {"to": "bob"}, "id": "c1"}, {"text": "sent"}],
        tools=["tools.py:send"],
    )
    folder = workspace.path / "agents" / "sender"
    (folder / "tools.py").write_text(TOOLS_PY)
    return folder


def until(page: Any, check: Any, what: str) -> Any:
    """Poll ``check``, letting the page's handlers run meanwhile."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        page.wait_for_timeout(50)
    raise AssertionError(f"never: {what}")


def test_a_cut_call_is_told_it_happened_from_the_chat_with_its_result(
    workspace: Workspace, browser: Any, tmp_path: Path
) -> None:
    folder = sender(workspace, free_port())
    effects = folder / "effects.txt"
    (folder / "hold").write_text("")
    page = browser_page(browser, KEYS["alice"])
    confirms: list[dict[str, Any]] = []
    # 1. The first server runs the call; it is killed once the effect happened.
    with soulacy_serve(workspace.path) as (url, first):
        page.goto(url + "/#/chat")
        page.locator("#chat-agent").select_option("sender")
        page.get_by_role("textbox", name="Message").fill("tell bob")
        page.get_by_role("button", name="Send").click()
        until(page, effects.exists, "the tool's effect")
        first.kill()
        first.wait(timeout=30)
    (folder / "hold").unlink()
    run_id = page.locator("article.assistant").nth(0).get_attribute("data-run-id")
    session = page.locator(".session").inner_text().removeprefix("session ")
    assert run_id
    page.context.close()
    # 2. The next server, on the same address: the run's same-id retry waits for a person.
    with soulacy_serve(workspace.path) as (again, _):
        assert again == url
        body = {"agent_id": "sender", "text": "tell bob", "session_id": session, "run_id": run_id}
        answers: list[httpx.Response] = []

        def retry() -> None:
            answers.append(httpx.post(f"{url}/api/v1/chat", json=body, headers=ALICE, timeout=120))

        retrying = threading.Thread(target=retry, daemon=True)
        retrying.start()
        page = browser_page(browser, KEYS["alice"])  # a person opens the conversation
        waiting = until(page, lambda: pending(sqlite_query(workspace)), "the retry waits")
        assert waiting == [(run_id, "cut:c1")]
        page.on(
            "request",
            lambda r: (
                confirms.append(json.loads(r.post_data or "null"))
                if r.url.endswith("/api/v1/chat/confirm")
                else None
            ),
        )
        page.goto(f"{url}/#/chat?session={session}")
        notice = page.locator(".approval[data-call-id='cut:c1']")
        expect(notice).to_have_attribute("data-status", "pending")
        expect(notice.locator(".approval-why")).to_contain_text("its effect is unknown")
        send = notice.get_by_role("button", name="It happened: send the result of the call of send")
        expect(send).to_be_disabled()  # nothing typed yet
        notice.get_by_role("textbox", name="If it happened, its result").fill(SAID)
        page.screenshot(path=str(tmp_path / "chat-cut-call.png"))
        send.click()
        expect(notice).to_have_attribute("data-status", "happened", timeout=30_000)
        expect(notice.locator(".approval-state")).to_have_text(
            "It happened by alice: not run again; the model got its result"
        )
        expect(notice.get_by_label("Its result, as given")).to_have_text(SAID)
        expect(notice.get_by_role("button")).to_have_count(0)
        retrying.join(60)
        assert [a.status_code for a in answers] == [200], [a.text for a in answers]
        assert answers[0].json()["status"] == "completed"
        completed = page.locator("article.assistant[data-status='completed']")
        expect(completed).to_have_count(1, timeout=30_000)
        history = httpx.get(f"{url}/api/v1/history/{session}", headers=ALICE, timeout=30)
    assert confirms == [{"run_id": run_id, "call_id": "cut:c1", "result": SAID}]
    assert effects.read_text().splitlines() == ["sent to bob"]  # once: it was not run again
    tools = [
        (e["content"], e["is_error"]) for e in history.json()["entries"] if e["role"] == "tool"
    ]
    assert tools == [(SAID, False), (SAID, False)]  # the person's result; replayed on c1 again
    assert page_errors(page, allowed=("Failed to load resource", "net::ERR")) == []
    page.context.close()
