"""A pytest plugin of this suite: nothing a test run started outlives it.

The pytest process that runs the session (the xdist controller, or the only process) starts
``reaper.py`` and marks its environment, so every process the tests start carries the mark (see
``reaper.py``). When the run ends, in any way, the reaper stops what is still marked: after a
normal run that is a leak, and it is reported on standard error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from _support.reaper import FOLDERS, MARK

REAPER = Path(__file__).with_name("reaper.py")
reaper_key = pytest.StashKey[subprocess.Popen[str]]()


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not os.path.isdir("/proc"):
        return  # an xdist worker is guarded by its controller's reaper; /proc is Linux's
    token = uuid.uuid4().hex
    listing = os.path.join(tempfile.gettempdir(), f"soulacy-test-run-{token}.folders")
    env = {k: v for k, v in os.environ.items() if k != MARK}  # the reaper is not its own prey
    config.stash[reaper_key] = subprocess.Popen(
        [sys.executable, str(REAPER), token, listing],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    os.environ[MARK] = token
    os.environ[FOLDERS] = listing


def pytest_unconfigure(config: pytest.Config) -> None:
    reaper = config.stash.get(reaper_key, None)
    if reaper is None:
        return
    os.environ.pop(MARK, None)
    os.environ.pop(FOLDERS, None)
    leftovers, _ = reaper.communicate("", timeout=60)  # closes the pipe: the run is over
    if leftovers.strip():
        sys.stderr.write(leftovers)
