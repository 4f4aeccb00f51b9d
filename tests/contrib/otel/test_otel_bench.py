"""The tracing benchmark still runs (a tiny size): nothing is timed here; the figures are in
docs/observability.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "otel_turns.py"


@pytest.mark.parametrize("mode", ["off", "metrics", "on"])
def test_otel_turns(mode: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--one", "30", "--mode", mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert (data["turns"], data["mode"]) == (30, mode)
    assert data["us_per_turn"] > 0
