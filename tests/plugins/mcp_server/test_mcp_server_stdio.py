"""Agents as MCP tools over stdio: a real ``soulacy mcp serve --stdio`` process, started and
spoken to by the official MCP client SDK as a desktop client would."""

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
import trio
from mcp import Client
from mcp_server_support import MODES, agents, stdio_parameters, text_of
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from soulacy.testing import Workspace


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_lists_the_agents_and_a_call_is_a_run_with_its_reply(
    workspace: Workspace,
    mode: str,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    agents(workspace)
    async with Client(stdio_parameters(workspace), mode=mode, cache=None) as client:
        listed = await client.list_tools()
        answered = await client.call_tool("echo", {"text": "hi"})
        failed = await client.call_tool("short", {"text": "go"})
        era = client.protocol_version
    assert (era in MODERN_PROTOCOL_VERSIONS) == (mode == "auto")  # both eras are served
    assert sorted(tool.name for tool in listed.tools) == ["echo", "short"]
    assert not answered.is_error
    assert text_of(answered) == "hello there"
    assert answered.meta is not None
    assert answered.meta["status"] == "completed"
    assert failed.is_error
    assert failed.meta is not None
    assert failed.meta["status"] == "incomplete"
    assert "ended incomplete: " in text_of(failed)
    # The run is stored as a run of the command line: no principal.
    shown = soulacy_cli(["runs", "show", answered.meta["run_id"], "--json"], cwd=workspace.path)
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)["run"]
    assert run["agent_id"] == "echo"
    assert run["principal"] is None


def _started(workspace: Workspace, log: Path) -> subprocess.Popen[bytes]:
    parameters = stdio_parameters(workspace)
    err = log.open("wb")
    process = subprocess.Popen(
        [parameters.command, *parameters.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        env=parameters.env,
        cwd=parameters.cwd,
    )
    err.close()
    deadline = time.monotonic() + 60
    while "serving" not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    return process


def test_a_stop_signal_ends_the_stdio_server_while_its_client_keeps_stdin_open(
    workspace: Workspace, tmp_path: Path
) -> None:
    agents(workspace)
    log = tmp_path / "stderr.log"
    process = _started(workspace, log)
    try:
        asked = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        took = time.monotonic() - asked
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.close()
        out = process.stdout.read()
        process.stdout.close()
    assert code == 0, log.read_text()
    assert took < 10, log.read_text()  # not waiting for a line that never comes
    assert "SIGTERM received" in log.read_text()
    assert out == b""  # standard output carries the protocol only


def test_closing_stdin_ends_the_stdio_server(workspace: Workspace, tmp_path: Path) -> None:
    agents(workspace)
    process = _started(workspace, tmp_path / "stderr.log")
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.close()
    try:
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


def test_mcp_serve_without_stdio_says_what_it_serves(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    agents(workspace)
    done = soulacy_cli(["mcp", "serve"], cwd=workspace.path)
    assert done.returncode != 0
    assert "expected --stdio" in done.stderr
    assert "`soulacy serve` serves it over streamable HTTP, at /mcp" in done.stderr


def test_the_commands_help_imports_neither_the_sdk_nor_trio(tmp_path: Path) -> None:
    probe = (
        "import contextlib, io, json, sys\n"
        "from soulacy.cli import main\n"
        "for argv in (['--help'], ['mcp', 'serve', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main(argv, environ={}) == 0\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")},
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert "soulacy.plugins.mcp_server" in modules  # it declares the command
    assert not modules & {"mcp", "trio", "soulacy.plugins.mcp_server._stdio"}


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_the_client_cancels_cancels_its_run(
    workspace: Workspace,
    mode: str,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    async with Client(stdio_parameters(workspace), mode=mode, cache=None) as client:
        with trio.move_on_after(2):
            await client.call_tool("slow", {"text": "take your time"})
        after = await client.call_tool("echo", {"text": "still there?"})  # the session goes on
    assert text_of(after) == "hello there"
    shown = soulacy_cli(["runs", "--json"], cwd=workspace.path)
    assert shown.returncode == 0, shown.stderr
    statuses = {run["agent_id"]: run["status"] for run in json.loads(shown.stdout)}
    assert statuses == {"slow": "cancelled", "echo": "completed"}
