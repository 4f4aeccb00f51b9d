"""Ownership across real processes sharing one SQLite store: leases, fencing, attempts.

Each test starts ``soulacy`` processes on one workspace and kills, stops or races them:
kill -9 mid-turn (taken over at once on the same host, after expiry from "another host" —
a process in its own UTS namespace with another hostname), SIGSTOP past the lease, two
processes on one conversation, a cancel from another process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

TOOLS_PY = '''
import os, time
from pathlib import Path


def slow(name: str) -> str:
    """Marks that it started, then takes SOULACY_TEST_SLOW seconds."""
    marks = Path(os.environ["SOULACY_TEST_MARKS"])
    (marks / f"{name}-{os.getpid()}").write_text("")
    time.sleep(float(os.environ.get("SOULACY_TEST_SLOW", "0")))
    return f"{name} done"
'''

SHORT_LEASES = {"ttl": "1s", "heartbeat": "200ms", "cancel_poll": "100ms"}


def setup(workspace: Workspace, leases: dict[str, str] | None = None) -> Path:
    marks = workspace.path / "marks"
    marks.mkdir()
    if leases:
        workspace.write_config({"leases": leases})
    workspace.scripted_agent(
        "a",
        [{"tool": "slow", "arguments": {"name": "step"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:slow"],
        tool_effects={"slow": "idempotent"},  # a retry runs a cut call again: ownership tests
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(TOOLS_PY)
    return marks


def cli(workspace: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args]


def env(marks: Path, slow: float = 0) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    return {**clean, "SOULACY_TEST_MARKS": str(marks), "SOULACY_TEST_SLOW": str(slow)}


def run(workspace: Workspace, marks: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli(workspace, *args), env=env(marks), capture_output=True, text=True, timeout=120
    )


def start(workspace: Workspace, marks: Path, run_id: str, *, prefix: list[str] | None = None):
    command = [*(prefix or []), *cli(workspace, *chat(run_id))]
    return subprocess.Popen(
        command, env=env(marks, slow=60), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def chat(run_id: str) -> list[str]:
    return ["run", "a", "go", "--run-id", run_id, "--session", "S", "--json"]


def wait_for_mark(marks: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not any(marks.iterdir()):
        if proc.poll() is not None:
            raise AssertionError(
                f"the run exited early: {proc.stderr.read() if proc.stderr else ''}"
            )
        assert time.monotonic() < deadline, "the run never reached its tool call"
        time.sleep(0.02)


def runs(workspace: Workspace, marks: Path) -> dict[str, dict[str, Any]]:
    out = run(workspace, marks, "runs", "--json")
    assert out.returncode == 0, out.stderr
    return {r["run_id"]: r for r in json.loads(out.stdout)}


def history(workspace: Workspace, marks: Path) -> list[dict[str, Any]]:
    out = run(workspace, marks, "history", "S", "--json")
    assert out.returncode == 0, out.stderr
    entries: list[dict[str, Any]] = json.loads(out.stdout)
    return entries


def metadata(out: subprocess.CompletedProcess[str] | str) -> dict[str, Any]:
    text = out if isinstance(out, str) else out.stdout
    data: dict[str, Any] = json.loads(text)["metadata"]
    return data


def kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def test_kill_9_mid_turn_shows_interrupted_and_a_retry_on_the_same_host_takes_over_at_once(
    workspace: Workspace,
) -> None:
    marks = setup(workspace)  # default leases: 30s; the same host needs no expiry
    victim = start(workspace, marks, "R1")
    try:
        wait_for_mark(marks, victim)
    finally:
        kill(victim)
    record = runs(workspace, marks)["R1"]
    assert record["status"] == "interrupted"
    assert record["lease"]["owner"]["pid"] == victim.pid
    assert record["lease"]["heartbeat_at"] > 0
    listing = run(workspace, marks, "runs")
    assert "R1  a  session S  interrupted" in listing.stdout
    assert f"owner pid {victim.pid} on" in listing.stdout
    # The history shows the crashed run's entries as interrupted, never as pending.
    crashed = [e for e in history(workspace, marks) if e["run_id"] == "R1"]
    assert crashed
    assert {e["metadata"]["status"] for e in crashed} == {"interrupted"}

    began = time.monotonic()
    retry = run(workspace, marks, *chat("R1"))
    took = time.monotonic() - began
    assert retry.returncode == 0, retry.stderr
    meta = metadata(retry)
    assert (meta["status"], meta["attempt"]) == ("completed", 2)
    assert took < 25, f"the retry waited {took:.1f}s: a dead owner on this host is taken at once"

    entries = [e for e in history(workspace, marks) if e["run_id"] == "R1"]
    first = [e for e in entries if e["attempt"] == 1]
    second = [e for e in entries if e["attempt"] == 2]
    assert first
    assert second
    assert {e["metadata"]["status"] for e in first} == {"interrupted"}
    assert {e["metadata"]["status"] for e in second} == {"completed"}
    assert runs(workspace, marks)["R1"]["status"] == "completed"


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_an_owner_on_another_host_is_taken_over_only_after_its_lease_expires(
    workspace: Workspace,
) -> None:
    probe = subprocess.run(["unshare", "-u", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("cannot make a UTS namespace here (needs root or user namespaces)")
    marks = setup(workspace, SHORT_LEASES)
    elsewhere = ["unshare", "-u", "sh", "-c", 'hostname elsewhere && exec "$@"', "sh"]
    victim = start(workspace, marks, "R2", prefix=elsewhere)
    try:
        wait_for_mark(marks, victim)
    finally:
        kill(victim)
    # Its pid is gone, but from here nothing proves a process on "elsewhere" gone: until the
    # lease expires the run reads as running; then it is interrupted.
    seen = runs(workspace, marks)["R2"]
    assert seen["status"] in ("running", "interrupted")
    if seen["status"] == "interrupted":  # a slow machine: the lease already expired
        assert seen["lease"]["expires_at"] <= time.time()
    else:
        assert seen["lease"] is None or seen["lease"]["owner"]["host"] == "elsewhere"
    time.sleep(1.2)
    gone = runs(workspace, marks)["R2"]
    assert gone["status"] == "interrupted"
    assert gone["lease"]["owner"]["host"] == "elsewhere"
    retry = run(workspace, marks, *chat("R2"))
    assert retry.returncode == 0, retry.stderr
    assert (metadata(retry)["status"], metadata(retry)["attempt"]) == ("completed", 2)


def test_an_owner_stopped_past_its_lease_cannot_write_after_a_takeover_and_stops(
    workspace: Workspace,
) -> None:
    marks = setup(workspace, SHORT_LEASES)
    victim = start(workspace, marks, "R3")
    try:
        wait_for_mark(marks, victim)
        before = [e for e in history(workspace, marks) if e["run_id"] == "R3"]
        victim.send_signal(signal.SIGSTOP)
        time.sleep(1.5)  # past the 1s lease
        retry = run(workspace, marks, *chat("R3"))
        assert retry.returncode == 0, retry.stderr
        assert (metadata(retry)["status"], metadata(retry)["attempt"]) == ("completed", 2)
        after_retry = history(workspace, marks)
        victim.send_signal(signal.SIGCONT)
        out, err = victim.communicate(timeout=60)
    finally:
        kill(victim)
    assert victim.returncode != 0, err
    stale = metadata(out)
    assert (stale["status"], stale["incomplete_reason"]) == ("failed", "lease_lost"), err
    # Nothing the stale owner did after resuming reached the store.
    assert history(workspace, marks) == after_retry

    def rows(entries: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
        return [(e["id"], e["role"], e["content"]) for e in entries]

    first = [e for e in after_retry if e["run_id"] == "R3" and e["attempt"] == 1]
    assert rows(first) == rows(before)
    assert {e["metadata"]["status"] for e in first} == {"interrupted"}
    assert runs(workspace, marks)["R3"]["status"] == "completed"


DRIVER = """
import json, sys, trio
from soulacy.kernel import Kernel

async def main(workspace, tag, count):
    results = []
    kernel = Kernel.load(workspace)
    try:
        for index in range(count):
            result = await kernel.run("b", f"{tag}-{index}", session_id="S")
            results.append(result.status)
    finally:
        await kernel.aclose()
    print(json.dumps(results))

trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def test_two_processes_on_one_conversation_never_interleave_their_turns(
    workspace: Workspace,
) -> None:
    marks = setup(workspace, SHORT_LEASES)
    workspace.scripted_agent(
        "b",
        [{"tool": "slow", "arguments": {"name": "b"}}, {"text": "done"}],
        tools=["tools.py:slow"],
        tool_effects={"slow": "idempotent"},
        repeat=True,
    )
    (workspace.path / "agents" / "b" / "tools.py").write_text(TOOLS_PY)
    count = 6
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(workspace.path), tag, str(count)],
            env=env(marks, slow=0.02),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p", "q")
    ]
    try:
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            kill(proc)
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out) == ["completed"] * count
    entries = history(workspace, marks)
    order = [e["run_id"] for e in entries]
    runs_seen = list(dict.fromkeys(order))
    assert len(runs_seen) == 2 * count
    # Each run's entries are contiguous: no turn of one run sits between another's.
    assert order == [run_id for run_id in runs_seen for _ in range(order.count(run_id))]
    for run_id in runs_seen:
        roles = [e["role"] for e in entries if e["run_id"] == run_id]
        assert roles == ["user", "assistant", "tool", "assistant"], roles


def test_a_cancel_from_another_process_stops_the_run(workspace: Workspace) -> None:
    marks = setup(workspace, SHORT_LEASES)
    victim = start(workspace, marks, "R5")
    try:
        wait_for_mark(marks, victim)
        asked = run(workspace, marks, "runs", "cancel", "R5")
        assert asked.returncode == 0, asked.stderr
        out, err = victim.communicate(timeout=30)
    finally:
        kill(victim)
    meta = metadata(out)
    assert meta["status"] == "cancelled", err
    assert runs(workspace, marks)["R5"]["status"] == "cancelled"
    missing = run(workspace, marks, "runs", "cancel", "R5")
    assert missing.returncode != 0
    assert "no running run 'R5'" in missing.stderr
