"""Two real processes share one SQLite store: each tick runs once in total.

Both wake for the same minute's tick, which is the race this guards; so it waits for a real
minute boundary (a process cannot be given another clock), in a parallel worker of its own.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


def test_two_processes_run_each_tick_once(workspace: Workspace) -> None:
    workspace.write_config("server:\n  enabled: false\n")
    workspace.scripted_agent(
        "cron", [{"text": "tick done"}], repeat=True, schedule={"cron": "* * * * *"}
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    command = [
        sys.executable,
        "-m",
        "soulacy.cli",
        "--workspace",
        str(workspace.path),
        "serve",
    ]
    procs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    db = workspace.path / "soulacy.db"
    try:
        deadline = time.monotonic() + 100  # the next minute boundary, and a margin
        runs: list[tuple[str, str]] = []
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    with sqlite3.connect(db) as conn:
                        runs = conn.execute(
                            "SELECT run_id, status FROM runs WHERE run_id LIKE 'schedule:cron:%'"
                        ).fetchall()
                except sqlite3.OperationalError:  # the schema is still being created: not yet
                    runs = []
                if runs and all(status != "running" for _, status in runs):
                    break
            time.sleep(0.5)
        time.sleep(3)  # give the other process every chance to run the same tick too
        with sqlite3.connect(db) as conn:
            runs = conn.execute(
                "SELECT run_id, status FROM runs WHERE run_id LIKE"
                " 'schedule:cron:%' ORDER BY run_id"
            ).fetchall()
            # A run id names the tick, so a second execution of a tick would reuse the row of
            # `runs`; what it cannot hide is a second request in the history.
            executions = conn.execute(
                "SELECT run_id, COUNT(*) FROM conversation_history WHERE role = 'user' AND"
                " run_id LIKE 'schedule:cron:%' GROUP BY run_id"
            ).fetchall()
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        errors = [proc.communicate(timeout=60)[1] for proc in procs]
    assert runs, f"no scheduled run within the time limit: {errors}"
    assert runs[0][1] == "completed"
    assert executions, "the scheduled run left no history"
    assert all(count == 1 for _, count in executions), executions  # each tick ran once
    assert all(proc.returncode == 0 for proc in procs), errors
