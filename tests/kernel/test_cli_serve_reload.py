"""An agent's SOUL.yaml edited while `soulacy serve` runs takes effect at the agent's next run;
an invalid edit is logged and not taken; what the services read once at start (a schedule,
config.yaml) is said to need a restart (issue 38, observation 8; docs/cli.md)."""

from __future__ import annotations

import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from soulacy.kernel import Kernel
from soulacy.plugins.core._reload import WorkspaceFiles
from soulacy.testing import Workspace

Make = Callable[..., Kernel]


def _touch(path: Path, text: str) -> None:
    """Write ``text`` and move the modification time on, as a later save would."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_a_valid_edit_is_used_by_the_next_run(
    workspace: Workspace, make_kernel: Make, caplog: pytest.LogCaptureFixture
) -> None:
    path = workspace.write_agent("a", "system_prompt: before\n")
    kernel = make_kernel()
    files = WorkspaceFiles(kernel)
    assert kernel.agent("a").section("system_prompt") == "before"
    _touch(path, "system_prompt: after\n")
    with caplog.at_level(logging.INFO, "soulacy.core"):
        files.look()
    assert kernel.agent("a").section("system_prompt") == "after"
    assert "agents/a/SOUL.yaml reloaded: the next runs of 'a' use it" in caplog.text


def test_an_invalid_edit_is_logged_and_the_last_valid_version_kept(
    workspace: Workspace, make_kernel: Make, caplog: pytest.LogCaptureFixture
) -> None:
    path = workspace.write_agent("a", "system_prompt: before\n")
    kernel = make_kernel()
    files = WorkspaceFiles(kernel)
    _touch(path, "system_prompt: after\nmax_turns: lots\n")
    files.look()
    assert kernel.agent("a").section("system_prompt") == "before"
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage().startswith(
        "agents/a/SOUL.yaml changed and is invalid, not reloaded (its runs keep the version"
        " loaded before): invalid configuration:"
    ), record.getMessage()
    assert "max_turns" in record.getMessage()


def test_a_new_agent_is_loaded_and_a_removed_one_forgotten(
    workspace: Workspace, make_kernel: Make, caplog: pytest.LogCaptureFixture
) -> None:
    path = workspace.write_agent("a", "name: A\n")
    kernel = make_kernel()
    files = WorkspaceFiles(kernel)
    workspace.write_agent("b", "name: B\n")
    path.unlink()
    with caplog.at_level(logging.INFO, "soulacy.core"):
        files.look()
    assert kernel.agent_ids() == ["b"]
    assert "agents/b/SOUL.yaml loaded: the next runs of 'b' use it" in caplog.text
    assert "agents/a/SOUL.yaml removed: agent 'a' is gone" in caplog.text


def test_a_changed_schedule_says_that_it_needs_a_restart(
    workspace: Workspace, make_kernel: Make, caplog: pytest.LogCaptureFixture
) -> None:
    path = workspace.write_agent("a", 'schedule: {cron: "0 7 * * *"}\n')
    kernel = make_kernel()
    files = WorkspaceFiles(kernel)
    _touch(path, 'schedule: {cron: "0 8 * * *"}\n')
    files.look()
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "the agent's schedule changed" in record.getMessage()
    assert "restart `soulacy serve`" in record.getMessage()


def test_config_yaml_edited_by_hand_needs_a_restart_and_by_the_server_does_not(
    workspace: Workspace, make_kernel: Make, caplog: pytest.LogCaptureFixture
) -> None:
    workspace.write_config("runtime:\n  default_max_turns: 10\n")
    kernel = make_kernel()
    files = WorkspaceFiles(kernel)
    kernel.update_config({"runtime.default_max_turns": 20})  # the portal's settings page
    files.look()
    assert not caplog.records, caplog.text
    _touch(kernel.config_file, "runtime:\n  default_max_turns: 30\n")
    files.look()
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "config.yaml changed on disk: the running server keeps the configuration" in (
        record.getMessage()
    )


def _lines(stream: object) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _until(lines: queue.Queue[str | None], needle: str, seconds: float = 60) -> str:
    deadline, seen = time.monotonic() + seconds, []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"expected a line with {needle!r} on stderr, got {''.join(seen)!r}")


def test_serve_answers_with_the_edited_agent_without_a_restart(workspace: Workspace) -> None:
    from soulacy.sdk import Client

    workspace.write_agent("a", "llm: {provider: scripted, model: first.yaml}\n")
    (workspace.path / "first.yaml").write_text('steps:\n  - text: "first"\n', encoding="utf-8")
    (workspace.path / "second.yaml").write_text('steps:\n  - text: "second"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    command = ["--log-level", "info", "-w", str(workspace.path), "serve", "--port", "0"]
    server = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", *command],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = _lines(server.stderr)
        found = re.search(r"API (http://\S+)/api/v1", _until(lines, "soulacy: serving"))
        assert found, "expected the API's URL on the serving line"
        with Client(found[1], timeout=60) as client:
            assert client.chat("a", "hi") == "first"
            _touch(
                workspace.path / "agents" / "a" / "SOUL.yaml",
                "llm: {provider: scripted, model: second.yaml}\n",
            )
            _until(lines, "agents/a/SOUL.yaml reloaded")
            assert client.chat("a", "hi") == "second"
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
        assert server.stderr is not None
        server.stderr.close()


def test_an_edited_tool_file_is_imported_again_by_the_next_run(tmp_path: Path) -> None:
    from soulacy.plugins.file_tools import load_file_tool

    tools = tmp_path / "tools.py"
    tools.write_text("def answer() -> int:\n    return 1\n", encoding="utf-8")
    assert load_file_tool("tools.py:answer", tmp_path).function() == 1
    assert load_file_tool("tools.py:answer", tmp_path).function() == 1  # imported once
    _touch(tools, "def answer() -> int:\n    return 2\n")
    assert load_file_tool("tools.py:answer", tmp_path).function() == 2
