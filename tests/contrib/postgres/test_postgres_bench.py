"""bench/postgres.py still runs (tiny sizes, on the session's server): nothing here is timed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pg_support import Server

pytestmark = pytest.mark.bench

BENCH = Path(__file__).resolve().parents[3] / "bench" / "postgres.py"
FINISH = BENCH.with_name("postgres_finish.py")


def run_bench(script: Path, args: list[str], server: Server) -> tuple[str, dict[str, Any]]:
    """Run a benchmark script on the session's server: its output and its last line's JSON."""
    done = subprocess.run(
        [sys.executable, str(script), *args, "--dsn", server.admin_dsn],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(done.stdout.splitlines()[-1])


def test_the_postgres_benchmark_runs(postgres_server: Server) -> None:
    args = ["--rounds", "1", "--runs", "2", "--pg-writes", "5", "--sqlite-writes", "5"]
    args += ["--engine-turns", "10", "--counts", "2", "--takeovers", "1", "--ttl", "1"]
    stdout, data = run_bench(BENCH, args, postgres_server)
    assert set(data["us"]) == {
        f"{stem}-{store}"
        for stem in ("floor", "sql", "turn", "engine")
        for store in ("sqlite", "pg", "pga")
    }
    assert {key: len(runs) for key, runs in data["processes"].items()} == {
        "sqlite-2": 1,
        "pg-2": 1,
        "pga-2": 1,
    }
    assert len(data["takeover_same_host_ms"]) == 1
    assert "| PostgreSQL | 2 |" in stdout


def test_the_finish_run_benchmark_runs(postgres_server: Server) -> None:
    args = ["--sizes", "3", "--rounds", "1", "--runs", "1", "--turn-writes", "3"]
    _, data = run_bench(FINISH, [*args, "--floor-writes", "3"], postgres_server)
    assert [f["rewritten"] for f in data["finish"]["after-3"]] == [0.0]
    assert set(data["turn_us"]) == {"turn-after", "turn-async-after"}
    assert len(data["turn_us"]["turn-after"]) == len(data["floor_us"]) == 1
