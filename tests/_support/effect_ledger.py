"""The effect ledger with real processes (issue 40, item 1), on any store: ``soulacy run`` is
killed (SIGKILL) after its tool's effect happened and before the call's result was stored. The
same-id retry in a new process never runs the call again blindly: an ``unsafe`` tool (the
default) waits for a person's decision, shown with the evidence (approve: run it again; deny:
not run again; happened: not run again, the model gets the result the person gave); an
``idempotent`` one runs again under the same idempotency key, so its effect still happens once.
``query`` reads the store's tables (SQLite or PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soulacy.testing import Workspace

Query = Callable[[str], list[tuple[Any, ...]]]

TOOLS_PY = '''
import os, time
from pathlib import Path

from soulacy.kernel import current_tool_call

HERE = Path(__file__).parent


def send(to: str) -> str:
    """Send a message (appends it to effects.txt), once per idempotency key when dedupe is on."""
    key = current_tool_call().idempotency_key
    with (HERE / "keys.txt").open("a") as fh:
        fh.write(key + "\\n")
    seen = (HERE / "keys.txt").read_text().splitlines()
    if not (os.environ.get("DEDUPE") and seen.count(key) > 1):
        with (HERE / "effects.txt").open("a") as fh:
            fh.write(f"sent to {to}\\n")
    if (HERE / "hold").exists():  # the effect happened; the result is not stored yet
        time.sleep(120)
    return f"sent to {to}"
'''


def agent(workspace: Workspace, config: dict[str, Any] | None = None, **keys: Any) -> Path:
    workspace.write_config({"leases": {"cancel_poll": "200ms"}, **(config or {})})
    workspace.scripted_agent(
        "a",
        [{"tool": "send", "arguments": {"to": "bob"}, "id": "c1"}, {"text": "sent"}],
        tools=["tools.py:send"],
        **keys,
    )
    folder = workspace.path / "agents" / "a"
    (folder / "tools.py").write_text(TOOLS_PY)
    return folder


def cli(workspace: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args]


def env(dedupe: bool = False) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SOULACY_", "DEDUPE"))}
    return {**clean, "DEDUPE": "1"} if dedupe else clean


def soulacy(
    workspace: Workspace, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(workspace, *args), env=env(), capture_output=True, text=True, timeout=120, input=stdin
    )


# What a person says the cut call's result was, given on standard input (``--result -``).
SAID = "sent to bob (message id 42, seen in the mail log)\nno need to send it again"


def start(workspace: Workspace, dedupe: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli(workspace, "run", "a", "tell bob", "--run-id", "E1", "--session", "S", "--json"),
        env=env(dedupe),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def until(check: Any, proc: subprocess.Popen[str], what: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the run exited before {what}: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def killed_after_the_effect(
    workspace: Workspace, folder: Path, query: Query, dedupe: bool = False
) -> None:
    """The first attempt: killed once its call's effect happened, its result not stored."""
    (folder / "hold").write_text("")
    proc = start(workspace, dedupe)
    try:
        until(lambda: (folder / "effects.txt").exists(), proc, "the effect")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    (folder / "hold").unlink()
    assert query("SELECT count(*) FROM tool_records") == [(0,)]  # its result: not stored


def pending(query: Query) -> list[tuple[Any, ...]]:
    try:
        return query("SELECT run_id, call_id FROM tool_approvals WHERE approved IS NULL")
    except Exception:  # not created yet
        return []


def sqlite_query(workspace: Workspace) -> Query:
    def query(sql: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(workspace.path / "soulacy.db") as conn:
            return conn.execute(sql).fetchall()

    return query


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def effects(folder: Path) -> list[str]:
    return (folder / "effects.txt").read_text().splitlines()


def check_an_unsafe_cut_call_waits_for_a_decision(
    workspace: Workspace, query: Query, decision: str, config: dict[str, Any] | None = None
) -> None:
    """SIGKILL after the effect; the retry asks a person, and does what the decision says."""
    folder = agent(workspace, config)
    killed_after_the_effect(workspace, folder, query)
    retry = start(workspace)
    try:
        assert until(lambda: pending(query), retry, "a decision is asked") == [("E1", "cut:c1")]
        time.sleep(0.3)
        assert effects(folder) == ["sent to bob"]  # not run again meanwhile
        shown = json.loads(soulacy(workspace, "runs", "approvals", "--json").stdout)
        assert [(r["call_id"], r["tool"], r["arguments"]) for r in shown] == [
            ("cut:c1", "send", {"to": "bob"})
        ]
        assert "its effect is unknown" in json.dumps(shown[0])  # the evidence, with the ask
        if decision == "happened":  # from another process, the result on standard input
            decided = soulacy(
                workspace, "runs", "happened", "E1", "cut:c1", "--approver", "ops",
                "--result", "-", stdin=SAID,
            )  # fmt: skip
        else:
            decided = soulacy(workspace, "runs", decision, "E1", "cut:c1", "--approver", "ops")
        assert decided.returncode == 0, decided.stderr
        result = finish(retry)
    finally:
        if retry.poll() is None:
            retry.kill()
            retry.communicate()
    assert result["metadata"]["status"] == "completed"
    history = json.loads(soulacy(workspace, "history", "S", "--json").stdout)
    answers = [e["content"] for e in history if e["role"] == "tool"]
    if decision == "deny":
        assert effects(folder) == ["sent to bob"]  # exactly once
        assert answers[0].startswith("error: not run again")
    elif decision == "happened":
        assert effects(folder) == ["sent to bob"]  # exactly once: it happened, not run again
        assert answers[0] == SAID  # the model received the person's result, not an error
        errors = [e["is_error"] for e in history if e["role"] == "tool"]
        assert errors == [False, False]
    else:  # a person said: run it again
        assert effects(folder) == ["sent to bob", "sent to bob"]
        assert answers[0] == "sent to bob"
    # The scripted model asks for c1 again on the retry: replayed (the same answer), not run.
    assert answers == [answers[0]] * 2
    if decision == "happened":
        check_the_decision_is_a_receipt_and_asked_once(workspace, folder, query)


def check_the_decision_is_a_receipt_and_asked_once(
    workspace: Workspace, folder: Path, query: Query
) -> None:
    """The decision that the call happened is in the proof; a later retry of the run id
    replays the call's stored answer, never asks again, never runs it."""
    shown = json.loads(soulacy(workspace, "runs", "show", "E1", "--json").stdout)
    receipts = {r["call_id"]: r for r in shown["proof"]["receipts"]}
    decision = json.loads(receipts["approval:cut:c1"]["result"])
    assert (decision["status"], decision["approver"], decision["result"]) == (
        "happened",
        "ops",
        SAID,
    )
    again = start(workspace)
    try:
        result = finish(again)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate()
    assert result["metadata"]["status"] == "completed"
    assert pending(query) == []
    assert query("SELECT count(*) FROM tool_approvals") == [(1,)]  # asked once, ever
    assert effects(folder) == ["sent to bob"]
    history = json.loads(soulacy(workspace, "history", "S", "--json").stdout)
    assert [e["content"] for e in history if e["role"] == "tool"] == [SAID] * 3


def check_an_idempotent_cut_call_runs_again_under_the_same_key(
    workspace: Workspace, query: Query, config: dict[str, Any] | None = None
) -> None:
    folder = agent(workspace, config, tool_effects={"send": "idempotent"})
    killed_after_the_effect(workspace, folder, query, dedupe=True)
    result = finish(start(workspace, dedupe=True))
    assert result["metadata"]["status"] == "completed"
    assert pending(query) == []  # nobody was asked
    assert effects(folder) == ["sent to bob"]  # once: the service saw the key again
    keys = (folder / "keys.txt").read_text().splitlines()
    assert keys == ["soulacy:E1:c1", "soulacy:E1:c1"]
