"""Approvals across real processes on one SQLite file: a run waiting in one ``soulacy run``
process is decided from another (``soulacy runs approve|deny``), or is resumed by the command
that decides it after its process was killed (kill -9)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

TOOLS_PY = '''
import time
from pathlib import Path


def _mark(name: str) -> None:
    with (Path(__file__).parent / "ran.txt").open("a") as fh:
        fh.write(f"{name} {time.time()}\\n")


def look(path: str) -> str:
    """Look at a file."""
    _mark("look")
    return f"{path} is there"


def delete(path: str) -> str:
    """Delete a file (only notes that it ran)."""
    _mark("delete")
    return f"deleted {path}"
'''

POLL = "200ms"  # leases.cancel_poll: how soon a waiting process sees another's decision


@pytest.fixture
def gated(workspace: Workspace) -> Workspace:
    workspace.write_config({"leases": {"cancel_poll": POLL}})
    workspace.scripted_agent(
        "gated",
        [
            {"tool": "look", "arguments": {"path": "a.txt"}, "id": "c0"},
            {"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"},
            {"text": "finished"},
        ],
        tools=["tools.py:look", "tools.py:delete"],
        confirm_tools=["delete"],
    )
    (workspace.path / "agents" / "gated" / "tools.py").write_text(TOOLS_PY)
    return workspace


def cli(workspace: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}


def soulacy(workspace: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(workspace, *args), env=env(), capture_output=True, text=True, timeout=120
    )


def start_run(workspace: Workspace, run_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli(workspace, "run", "gated", "clean up", "--run-id", run_id, "--session", "S", "--json"),
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ran(workspace: Workspace) -> list[tuple[str, float]]:
    path = workspace.path / "agents" / "gated" / "ran.txt"
    if not path.exists():
        return []
    return [(n, float(t)) for n, t in (line.split() for line in path.read_text().splitlines())]


def wait_until_waiting(workspace: Workspace, proc: subprocess.Popen[str], run_id: str) -> None:
    """Until the run's approval request is in the store (read straight from the file)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run exited early: {proc.communicate()}")
        try:
            with sqlite3.connect(workspace.path / "soulacy.db") as conn:
                row = conn.execute(
                    "SELECT call_id FROM tool_approvals WHERE run_id = ? AND approved IS NULL",
                    (run_id,),
                ).fetchone()
        except sqlite3.OperationalError:  # not created yet
            row = None
        if row is not None:
            return
        time.sleep(0.05)
    raise AssertionError("the run never asked for approval")


def finish(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    """The run's JSON result and what it said on stderr."""
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    data: dict[str, Any] = json.loads(out)
    return data, err


def test_a_decision_from_another_process_reaches_the_waiting_run_within_the_poll(
    gated: Workspace,
) -> None:
    proc = start_run(gated, "P1")
    try:
        wait_until_waiting(gated, proc, "P1")
        time.sleep(0.3)
        assert [n for n, _ in ran(gated)] == ["look"]  # delete waits
        approved = soulacy(gated, "runs", "approve", "P1", "c1", "--approver", "ops", "--json")
        assert approved.returncode == 0, approved.stderr
        decision = json.loads(approved.stdout)
        assert (decision["status"], decision["approver"], decision["decided_by"]) == (
            "approved",
            "ops",
            None,
        )
        assert (decision["woke"], decision["resumed"]) == (False, False)  # it runs elsewhere
        result, said = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert result["metadata"]["status"] == "completed"
    assert (
        "soulacy: run P1 waits for approval of call c1 (tool delete):"
        " `soulacy runs approve P1 c1` or `soulacy runs deny P1 c1`"
    ) in said
    marks = ran(gated)
    assert [n for n, _ in marks] == ["look", "delete"]
    latency = marks[1][1] - decision["decided_at"]
    print(f"cross-process confirm -> tool runs: {latency * 1000:.0f} ms (cancel_poll {POLL})")
    assert 0 <= latency < 5
    # A second decision is refused, naming the first.
    again = soulacy(gated, "runs", "deny", "P1", "c1")
    assert again.returncode != 0
    assert "already approved by ops" in again.stderr


def test_a_denial_from_the_command_line_is_the_models_refusal(gated: Workspace) -> None:
    proc = start_run(gated, "P2")
    try:
        wait_until_waiting(gated, proc, "P2")
        denied = soulacy(gated, "runs", "deny", "P2", "c1", "--approver", "ops", "--note", "no")
        assert denied.returncode == 0, denied.stderr
        assert denied.stdout.strip() == "denied call c1 of run P2 (approver ops)"
        result, _ = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert result["metadata"]["status"] == "completed"
    assert [n for n, _ in ran(gated)] == ["look"]
    history = json.loads(soulacy(gated, "history", "S", "--json").stdout)
    tool_results = [e["content"] for e in history if e["role"] == "tool"]
    assert tool_results[-1] == (
        "error: the call of tool 'delete' was denied by ops: no; it did not run"
    )
    listed = json.loads(soulacy(gated, "runs", "approvals", "--all", "--json").stdout)
    assert [(r["run_id"], r["call_id"], r["status"]) for r in listed] == [("P2", "c1", "denied")]


def test_after_kill_9_while_waiting_the_approving_command_resumes_the_run_exactly_once(
    gated: Workspace,
) -> None:
    proc = start_run(gated, "P3")
    try:
        wait_until_waiting(gated, proc, "P3")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    listed = soulacy(gated, "runs", "approvals")
    assert listed.returncode == 0, listed.stderr
    assert "P3  c1  delete({'path': 'a.txt'})  pending  agent gated" in listed.stdout
    runs = json.loads(soulacy(gated, "runs", "--json").stdout)
    assert [r["status"] for r in runs if r["run_id"] == "P3"] == ["interrupted"]
    approved = soulacy(gated, "runs", "approve", "P3", "c1", "--approver", "ops")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.splitlines() == [
        "approved call c1 of run P3 (approver ops)",
        "the process of run P3 is gone: resuming it here",
        "run P3: completed, attempt 2",
        "finished",
    ]
    # The replay re-executed nothing recorded: look ran once (before the kill), delete once.
    assert [n for n, _ in ran(gated)] == ["look", "delete"]
    shown = json.loads(soulacy(gated, "runs", "show", "P3", "--json").stdout)
    receipts = shown["proof"]["receipts"]
    assert [r["call_id"] for r in receipts] == ["c0", "approval:c1", "c1"]
    assert json.loads(receipts[1]["result"])["approver"] == "ops"


def test_deciding_what_does_not_exist_says_so(gated: Workspace) -> None:
    missing = soulacy(gated, "runs", "approve", "nope", "c1")
    assert missing.returncode != 0
    assert "no approval request for call 'c1' of run 'nope'" in missing.stderr
    assert "Traceback" not in missing.stderr


A_KEY, B_KEY = "approvals-key-of-a-0123456789", "approvals-key-of-b-9876543210"


def serve(workspace: Workspace) -> tuple[subprocess.Popen[str], str]:
    """``soulacy serve`` in a subprocess, with two principals' keys; (process, API URL)."""
    keys = {"SOULACY_SERVER__API_KEYS__ALPHA": A_KEY, "SOULACY_SERVER__API_KEYS__BETA": B_KEY}
    proc = subprocess.Popen(
        cli(workspace, "serve"),
        env={**env(), **keys},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url, lines = None, []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", line)
        url = found.group(1) if found else url
        if "soulacy: serving" in line:
            break
    assert url is not None, "".join(lines)
    return proc, url + "/api/v1"


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return err


def test_a_served_run_survives_a_server_restart_and_resumes_in_the_new_server(
    gated: Workspace,
) -> None:
    gated.write_config({"server": {"port": 0}, "leases": {"cancel_poll": POLL}})
    a = {"Authorization": f"Bearer {A_KEY}"}
    b = {"Authorization": f"Bearer {B_KEY}"}
    body = {"agent_id": "gated", "text": "clean up", "run_id": "S1", "session_id": "S"}
    first, url = serve(gated)
    try:
        with (
            httpx.Client(base_url=url, headers=a, timeout=60) as alice,
            alice.stream("POST", "/chat/stream", json=body) as events,
        ):
            for line in events.iter_lines():
                if line == "event: tool.approval":
                    break  # it waits; hanging up does not cancel the run
    finally:
        stopped = stop(first)  # SIGTERM while the run waits
    assert "Traceback" not in stopped
    assert [n for n, _ in ran(gated)] == ["look"]
    second, url = serve(gated)
    try:
        with (
            httpx.Client(base_url=url, headers=a, timeout=60) as alice,
            httpx.Client(base_url=url, headers=b, timeout=60) as bob,
        ):
            waiting = alice.get("/runs/S1").json()
            assert (waiting["status"], waiting["attempt"]) == ("interrupted", 1)
            confirm = {"run_id": "S1", "call_id": "c1", "approved": True}
            assert bob.post("/chat/confirm", json=confirm).status_code == 404
            decided = alice.post("/chat/confirm", json=confirm)
            assert decided.status_code == 200, decided.text
            assert decided.json()["resumed"] is True
            deadline = time.monotonic() + 60
            while alice.get("/runs/S1").json()["status"] != "completed":
                assert time.monotonic() < deadline, "the resumed run never completed"
                time.sleep(0.05)
            done = alice.get("/runs/S1").json()
            assert done["attempt"] == 2
            assert [r["call_id"] for r in done["proof"]["receipts"]] == [
                "c0",
                "approval:c1",
                "c1",
            ]
            again = alice.post("/chat/confirm", json=confirm)
            assert again.status_code == 409
    finally:
        stopped = stop(second)
    assert "Traceback" not in stopped
    assert [n for n, _ in ran(gated)] == ["look", "delete"]


def sse_events(lines: Any) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) of a stream's events, to its end."""
    found, name = [], ""
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            found.append((name, json.loads(line.removeprefix("data: "))))
    return found


def test_a_suspended_wait_holds_nothing_and_a_decision_on_another_server_resumes_it(
    gated: Workspace,
) -> None:
    """Past ``approvals.suspend_after`` the run ends its stream ``interrupted
    (awaiting_approval)`` and gives back its lease; a decision sent to another server on the
    same store resumes it there, and its events are read from that server."""
    gated.write_config(
        {
            "server": {"port": 0},
            "leases": {"cancel_poll": POLL},
            "approvals": {"suspend_after": "1ms"},
        }
    )
    a = {"Authorization": f"Bearer {A_KEY}"}
    b = {"Authorization": f"Bearer {B_KEY}"}
    body = {"agent_id": "gated", "text": "clean up", "run_id": "S2", "session_id": "S"}
    first, one = serve(gated)
    second, other = serve(gated)
    try:
        with (
            httpx.Client(headers=a, timeout=60) as alice,
            httpx.Client(headers=b, timeout=60) as bob,
        ):
            with alice.stream("POST", f"{one}/chat/stream", json=body) as stream:
                events = sse_events(stream.iter_lines())
            names = [name for name, _ in events]
            assert names[-2:] == ["tool.approval", "result"]
            result = events[-1][1]
            assert (result["status"], result["metadata"]["incomplete_reason"]) == (
                "interrupted",
                "awaiting_approval",
            )
            waiting = alice.get(f"{other}/runs/S2").json()  # no lease held: read on any server
            assert (waiting["status"], waiting["attempt"]) == ("interrupted", 1)
            assert [n for n, _ in ran(gated)] == ["look"]
            confirm = {"run_id": "S2", "call_id": "c1", "approved": True}
            assert bob.post(f"{other}/chat/confirm", json=confirm).status_code == 404
            decided = alice.post(f"{other}/chat/confirm", json=confirm)
            assert decided.status_code == 200, decided.text
            assert decided.json()["resumed"] is True
            with alice.stream("GET", f"{other}/runs/S2/events") as stream:
                resumed = sse_events(stream.iter_lines())
            assert resumed[-1][0] == "result"
            assert (resumed[-1][1]["status"], resumed[-1][1]["reply"]) == ("completed", "finished")
            done = alice.get(f"{one}/runs/S2").json()
            assert (done["status"], done["attempt"]) == ("completed", 2)
            assert bob.get(f"{one}/runs/S2").status_code == 404
    finally:
        stopped = stop(first) + stop(second)
    assert "Traceback" not in stopped
    assert [n for n, _ in ran(gated)] == ["look", "delete"]  # each effect once


def test_a_command_whose_run_is_suspended_ends_and_the_approving_command_resumes_it(
    gated: Workspace,
) -> None:
    """``soulacy run`` of a run suspended past ``approvals.suspend_after`` ends (exit 75,
    ``interrupted (awaiting_approval)``) rather than waiting on; ``soulacy runs approve``
    resumes the run in its own process, to its end."""
    gated.write_config({"leases": {"cancel_poll": POLL}, "approvals": {"suspend_after": "1ms"}})
    suspended = soulacy(gated, "run", "gated", "clean up", "--run-id", "P5", "--session", "S")
    assert suspended.returncode == 75, suspended.stderr
    assert "status: interrupted (awaiting_approval)" in suspended.stdout
    assert "soulacy runs approve P5 c1" in suspended.stderr
    assert [n for n, _ in ran(gated)] == ["look"]
    approved = soulacy(gated, "runs", "approve", "P5", "c1")
    assert approved.returncode == 0, approved.stderr
    assert "run P5: completed, attempt 2" in approved.stdout
    assert [n for n, _ in ran(gated)] == ["look", "delete"]
