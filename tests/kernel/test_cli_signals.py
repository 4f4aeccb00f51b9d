"""`soulacy run` stopped by a signal: the run is cancelled and recorded as such, not left running.

systemd, docker and CI time-outs stop a process with SIGTERM; a person with Ctrl-C (SIGINT).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from soulacy.testing import Workspace

MARK_TOOL = '''\
from pathlib import Path


def mark() -> str:
    """Say that the run is under way."""
    Path(__file__).with_name("started").write_text("yes")
    return "marked"
'''


def slow_agent(workspace: Workspace) -> Path:
    """An agent whose first turn calls a tool (the run is recorded as started), then whose model
    takes a minute to answer."""
    workspace.scripted_agent(
        "slow",
        [{"tool": "mark", "id": "m1"}, {"text": "too late", "sleep": 60}],
        tools=["tools.py:mark"],
    )
    (workspace.path / "agents" / "slow" / "tools.py").write_text(MARK_TOOL)
    return workspace.path / "agents" / "slow" / "started"


def stored_run(workspace: Workspace, run_id: str) -> tuple[str, str | None]:
    with sqlite3.connect(workspace.path / "soulacy.db") as conn:
        row = conn.execute(
            "SELECT status, incomplete_reason FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
    assert row is not None, f"run {run_id} is not in the store"
    return row[0], row[1]


@pytest.mark.parametrize(
    ("signum", "reason", "code"),
    [(signal.SIGTERM, "terminated", 143), (signal.SIGINT, "interrupted", 130)],
)
def test_a_signal_during_run_cancels_the_run_and_records_it(
    workspace: Workspace, signum: int, reason: str, code: int
) -> None:
    started = slow_agent(workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "run", "slow", "go", "--run-id", "R1"],
        cwd=workspace.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never reached its tool call"
        time.sleep(0.02)
    signalled = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    took = time.monotonic() - signalled
    assert proc.returncode == code, err
    assert took < 5.0, f"stopping took {took:.1f}s, more than the grace period"
    assert "Traceback" not in err
    assert f"soulacy: {signal.Signals(signum).name} received, cancelling run 'R1'" in err
    assert f"status: cancelled ({reason})" in out
    assert stored_run(workspace, "R1") == ("cancelled", reason)
