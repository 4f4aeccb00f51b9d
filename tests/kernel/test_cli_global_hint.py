"""Every command gives the global-options hint when one is given after it (issue 38,
observation 10): ``soulacy runs -w DIR`` took DIR for a subcommand and answered "invalid
choice" with no hint, while ``soulacy agents list -w DIR`` gave it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HINT = "global options (-w, -p, --debug) go before the command"


def _soulacy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    return subprocess.run(
        [sys.executable, "-m", "soulacy.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "-w", "DIR"),
        ("agents", "--workspace", "DIR"),
        ("policy", "--debug"),
        ("runs", "show", "-w", "DIR"),
        ("agents", "list", "--workspace=."),
    ],
)
def test_a_global_option_after_any_command_gets_the_hint(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    done = _soulacy(*(str(tmp_path) if arg == "DIR" else arg for arg in args), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert HINT in done.stderr, done.stderr
    assert done.stderr.count(HINT) == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_an_error_without_a_global_option_has_no_hint(tmp_path: Path) -> None:
    done = _soulacy("runs", "bogus", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "invalid choice: 'bogus'" in done.stderr, done.stderr
    assert HINT not in done.stderr, done.stderr
