"""Shared helpers of the test suite.

The fixtures ``workspace``, ``make_kernel``, ``kernel`` and ``hook_recorder`` come from Soulacy's
testing plugin, which a suite opts in to (installing Soulacy registers none; decision 0028).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

pytest_plugins = ["soulacy.testing.pytest_plugin", "_support.guard", "_support.browser"]


def run_soulacy(
    args: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the real ``soulacy`` launcher in a subprocess with a clean SOULACY_* environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "soulacy.cli", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def soulacy_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``soulacy_cli(args, cwd=..., env=...)`` runs the launcher in a subprocess."""
    return run_soulacy


# Tests that need what the quick loop leaves out, known by the fixture they ask for; the others
# (several processes, benchmarks) say so with a module-level ``pytestmark``.
MARKED_BY_FIXTURE = {"browser": "browser", "postgres_server": "postgres"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in MARKED_BY_FIXTURE.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(MARKED_BY_FIXTURE[fixture])


class _Transitions(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.wrong: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "no transition" in record.getMessage():
            self.wrong.append(record.getMessage())


@pytest.fixture(autouse=True)
def _runs_move_only_along_the_table() -> Iterator[None]:
    """Every test of the suite checks the engine's state machine: a run that moved along no
    transition of its table (plugins/engine/_states.py) fails the test that ran it."""
    handler = _Transitions()
    logger = logging.getLogger("soulacy.engine")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
    assert not handler.wrong, handler.wrong
