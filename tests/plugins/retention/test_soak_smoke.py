"""bench/soak.py still runs (tiny sizes) and prints its three points; nothing here is timed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench

SOAK = Path(__file__).resolve().parents[3] / "bench" / "soak.py"


def test_the_soak_prints_sizes_at_its_start_middle_and_end() -> None:
    args = ["--runs", "20", "--turns", "1", "--result-chars", "1000", "--prune-every", "5"]
    done = subprocess.run(
        [sys.executable, str(SOAK), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    points = [line.split()[0] for line in done.stdout.splitlines()[2:5]]
    assert points == ["start", "middle", "end"], done.stdout
    kept = int(done.stdout.splitlines()[4].split()[-1])
    assert kept <= 5  # every finished run pruned at each prune: at most a prune's worth kept
