"""``soulacy serve`` from a terminal: ``--host``/``--port``, a busy port, the start line.

Each test runs the real launcher in a subprocess and reads its stderr with a deadline (a
thread feeds the lines to a queue), never with a fixed sleep.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from soulacy.testing import Workspace

DEADLINE = 60.0


def _launch(workspace: Workspace, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    return subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _lines(stream: object) -> queue.Queue[str | None]:
    """The stream's lines, read by a thread; None once it ends."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _until(lines: queue.Queue[str | None], needle: str, deadline: float) -> list[str]:
    """Lines read until one contains ``needle`` (or the stream ends, or the deadline passes)."""
    seen: list[str] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return seen
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return seen
        if line is None:
            return seen
        seen.append(line)
        if needle in line:
            return seen


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that a listening socket of this test holds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("given", ["option", "config.yaml"])
def test_a_busy_port_is_one_line_and_exit_2(
    workspace: Workspace, busy_port: int, given: str
) -> None:
    keys = "  api_keys: {alice: key-alice-1}\n"  # keyless mode would warn first
    if given == "option":
        workspace.write_config("server:\n  port: 0\n" + keys)
        proc = _launch(workspace, "serve", "--port", str(busy_port))
    else:
        workspace.write_config(f"server:\n  port: {busy_port}\n" + keys)
        proc = _launch(workspace, "serve")
    try:
        _out, err = proc.communicate(timeout=DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert err.splitlines() == [
        f"soulacy: cannot listen on 127.0.0.1:{busy_port}: address already in use;"
        " stop what uses it or pass --port"
    ], err


def test_a_busy_port_in_keyless_mode_is_the_warning_and_one_line(
    workspace: Workspace, busy_port: int
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    proc = _launch(workspace, "serve", "--host", "127.0.0.1", "--port", str(busy_port))
    _out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 2, err
    assert [line for line in err.splitlines() if not line.startswith("soulacy: warning:")] == [
        f"soulacy: cannot listen on 127.0.0.1:{busy_port}: address already in use;"
        " stop what uses it or pass --port"
    ], err


def test_serve_on_host_and_port_names_the_api_the_portal_and_the_key_mode(
    workspace: Workspace,
) -> None:
    workspace.write_config("server:\n  port: 8\n  host: 192.0.2.1\n")  # overridden below
    proc = _launch(workspace, "serve", "--host", "127.0.0.1", "--port", "0")
    assert proc.stderr is not None
    lines = _lines(proc.stderr)
    try:
        seen = _until(lines, "soulacy: serving", time.monotonic() + DEADLINE)
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, _err = proc.communicate(timeout=DEADLINE)
    text = "".join(seen)
    assert seen, text
    assert "soulacy: serving" in seen[-1], text
    start = seen[-1]
    found = re.search(r"API (http://127\.0\.0\.1:(\d+))/api/v1\b", start)
    assert found is not None, start
    base, port = found.group(1), int(found.group(2))
    assert port != 0
    assert f"portal {base}/ " in start or f"portal {base}/," in start, start
    assert "keyless: loopback clients only" in start, start
    assert proc.returncode == 0
    assert "Traceback" not in text


def test_the_start_line_says_keys_are_required_when_they_are(workspace: Workspace) -> None:
    workspace.write_config("server:\n  port: 0\n  api_keys: {alice: key-alice-1}\n")
    proc = _launch(workspace, "serve")
    assert proc.stderr is not None
    lines = _lines(proc.stderr)
    try:
        seen = _until(lines, "soulacy: serving", time.monotonic() + DEADLINE)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=DEADLINE)
    start = seen[-1] if seen else ""
    assert "soulacy: serving" in start, "".join(seen)
    assert "API keys required" in start, start
    assert "key-alice-1" not in start
    assert "keyless" not in start


def test_a_bad_port_option_is_a_usage_error(workspace: Workspace) -> None:
    proc = _launch(workspace, "serve", "--port", "http")
    _out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 2
    assert "--port" in err
    assert "Traceback" not in err
