"""An interrupted test run leaves nothing running: a child pytest run holds an embedded
PostgreSQL, a ``soulacy serve``, an MCP server process and Chromium, is interrupted with SIGINT or
SIGTERM (in one process, and in an xdist worker), and every process it started is gone after it,
with the PostgreSQL data folder (``_support.guard`` and ``_support.reaper``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _support.http_server import CHROMIUM
from _support.reaper import MARK

pytestmark = [
    pytest.mark.processes,
    pytest.mark.skipif(not os.path.isdir("/proc"), reason="the reaper reads /proc (Linux)"),
]
TESTS = Path(__file__).parent
PATIENCE = 60.0  # seconds; nothing below waits this long when it works

CHILD_SUITE = """
import json, os, subprocess, sys, time
from pathlib import Path

import pytest
from pg_support import start_server
from _support.reaper import MARK, marked

MCP_SERVER = {mcp_server!r}
CHROMIUM = Path({chromium!r})


@pytest.fixture(scope="session")
def postgres():
    server = start_server()
    yield server
    server.stop()


@pytest.fixture
def serve(tmp_path):
    (tmp_path / "config.yaml").write_text("server:\\n  port: 0\\n")
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(tmp_path), "serve"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    while "soulacy: serving" not in proc.stderr.readline():
        pass
    yield proc
    proc.terminate()
    proc.wait()


@pytest.fixture
def mcp_server():
    proc = subprocess.Popen(
        [sys.executable, MCP_SERVER, "http", "-", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip().isdigit()  # its port, once it listens
    yield proc
    proc.terminate()
    proc.wait()


def test_holds_its_servers_until_interrupted(postgres, serve, mcp_server, request):
    if CHROMIUM.exists():
        request.getfixturevalue("browser").new_page()
    listing = {{
        "token": os.environ[MARK],
        "folder": postgres._folder,
        "processes": {{str(pid): cmd for pid, cmd in marked(os.environ[MARK]).items()}},
    }}
    Path({ready!r} + ".tmp").write_text(json.dumps(listing))
    os.replace({ready!r} + ".tmp", {ready!r})
    time.sleep({patience!r})  # the parent interrupts the run here
"""


def gone(pid: int) -> bool:
    """Not running: no such process, or a zombie nobody waited for yet."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"waited {PATIENCE}s for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("signum", "workers"),
    [(signal.SIGINT, []), (signal.SIGTERM, []), (signal.SIGTERM, ["-n", "1"])],
    ids=["SIGINT", "SIGTERM", "SIGTERM-xdist"],
)
def test_an_interrupted_run_leaves_no_server_running(
    tmp_path: Path, signum: int, workers: list[str]
) -> None:
    ready = tmp_path / "ready.json"
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_child.py").write_text(
        CHILD_SUITE.format(
            mcp_server=str(TESTS / "plugins" / "mcp" / "mcp_server.py"),
            chromium=str(CHROMIUM),
            ready=str(ready),
            patience=PATIENCE,
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS / "contrib" / "postgres")]),
    }
    plugins = ["-p", "_support.guard", "-p", "_support.browser", "-p", "no:cacheprovider"]
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", *plugins, *workers, "-q", "--rootdir", str(suite), "."],
        cwd=suite,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: ready.exists() or child.poll() is not None, "the child run's servers")
        assert ready.exists(), child.communicate()[0]
    finally:
        child.send_signal(signum)
        output = child.communicate(timeout=PATIENCE)[0]
    listing = json.loads(ready.read_text())
    processes = {int(pid): command for pid, command in listing["processes"].items()}
    commands = " | ".join(processes.values())
    assert listing["token"] != os.environ.get(MARK)  # the child run had a reaper of its own
    assert "postgres" in commands, commands
    assert "soulacy.cli" in commands, commands
    assert "mcp_server.py" in commands, commands
    if CHROMIUM.exists():
        assert "chromium" in commands, commands
    wait_for(lambda: all(gone(pid) for pid in processes), f"these to stop: {processes}")
    wait_for(lambda: not Path(listing["folder"]).exists(), "the PostgreSQL folder's removal")
    if signum == signal.SIGINT:  # pytest's own ending: the fixtures' clean-up ran
        assert "KeyboardInterrupt" in output, output
