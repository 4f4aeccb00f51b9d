"""The step benchmarks still run (tiny sizes): a benchmark that rots is found here, not later.

Nothing here is timed; the figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

BENCH = Path(__file__).resolve().parents[1] / "bench"


def run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("store", [[], ["--store"]])
def test_engine_turns(store: list[str]) -> None:
    data = json.loads(run("engine_turns.py", "--one", "30", *store))
    assert (data["turns"], data["store"]) == (30, bool(store))


def test_store_writes() -> None:
    out = run("store_writes.py", "--writes", "50", "--rounds", "1")
    assert "64 concurrent proof finalizations: 0 failures, 64 proofs stored" in out


def test_progress_memory() -> None:
    assert "memory ratio" in run("progress_memory.py", "--calls", "2000")


def test_http_load() -> None:
    data = json.loads(run("http_load.py", "--clients", "5", "--words", "3", "--json"))
    assert data["clients"] == 5
    assert data["events"] > 5 * 5


def test_serve_stop() -> None:
    data = json.loads(run("serve_stop.py", "--repeat", "1", "--json"))
    assert set(data) == {"SIGINT", "SIGTERM", "open_kernel exit", "repeat"}
