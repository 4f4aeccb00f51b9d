"""Same-id recovery with real processes: SIGKILL in the middle of a step, then retry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

STEPS_PY = '''
import os, time
from pathlib import Path

COUNTERS = Path(os.environ["SOULACY_TEST_COUNTERS"])


def _bump(name: str) -> int:
    path = COUNTERS / name
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


def first() -> int:
    """Counts its executions."""
    return _bump("first")


def second(wait: float) -> int:
    """Counts, then takes a while (the test kills the process during the wait)."""
    n = _bump("second")
    time.sleep(wait)
    return n


def third() -> int:
    """Counts its executions."""
    return _bump("third")
'''


def setup(workspace: Workspace, wait: float) -> Path:
    counters = workspace.path / "counters"
    counters.mkdir()
    workspace.write_agent(
        "wf",
        {
            "tools": ["steps.py:first", "steps.py:second", "steps.py:third"],
            "workflow": {
                "steps": [
                    {"id": "first", "tool": "first"},
                    {"id": "second", "tool": "second", "arguments": {"wait": wait}},
                    {"id": "third", "tool": "third"},
                ]
            },
        },
    )
    (workspace.path / "agents" / "wf" / "steps.py").write_text(STEPS_PY)
    return counters


def command(workspace: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args]


def env(counters: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    return {**clean, "SOULACY_TEST_COUNTERS": str(counters)}


def counts(counters: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in sorted(counters.iterdir())}


def run_cli(workspace: Workspace, counters: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(workspace, *args),
        env=env(counters),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_sigkill_in_a_step_then_retry_restores_refuses_and_completes_after_reconcile(
    workspace: Workspace,
) -> None:
    counters = setup(workspace, wait=60)
    run = ["run", "wf", "go", "--run-id", "R1", "--session", "S", "--json"]
    victim = subprocess.Popen(
        command(workspace, *run),
        env=env(counters),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while (counters / "second").exists() is False and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (counters / "second").exists(), "the workflow never reached its second step"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    assert counts(counters) == {"first": 1, "second": 1}

    refused = run_cli(workspace, counters, *run)
    assert refused.returncode == 1, refused.stderr
    meta = json.loads(refused.stdout)["metadata"]
    assert (meta["status"], meta["incomplete_reason"]) == ("failed", "needs_reconciliation")
    assert "soulacy runs reconcile R1 --step second --completed|--failed" in meta["error"]
    assert counts(counters) == {"first": 1, "second": 1}  # nothing ran again

    decided = run_cli(
        workspace, counters, "runs", "reconcile", "R1", "--step", "second", "--completed"
    )
    assert decided.returncode == 0, decided.stderr
    assert "recorded as completed by the operator" in decided.stdout

    done = run_cli(workspace, counters, *run)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["metadata"]["status"] == "completed"
    assert counts(counters) == {"first": 1, "second": 1, "third": 1}
    # The completed retry is stored as the run's next attempt, with its proof: the crashed
    # attempt no longer reads as interrupted.
    shown = run_cli(workspace, counters, "runs", "show", "R1", "--json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert (record["run"]["status"], record["run"]["attempt"]) == ("completed", 2)
    assert record["proof"] is not None


def test_two_processes_retrying_one_run_execute_each_step_once(workspace: Workspace) -> None:
    counters = setup(workspace, wait=0.5)
    run = ["run", "wf", "go", "--run-id", "R2", "--session", "S", "--json"]
    procs = [
        subprocess.Popen(
            command(workspace, *run),
            env=env(counters),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out + err
        assert json.loads(out)["metadata"]["status"] == "completed"
    assert counts(counters) == {"first": 1, "second": 1, "third": 1}
