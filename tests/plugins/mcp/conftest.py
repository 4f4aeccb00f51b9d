"""Real MCP server processes (tests/plugins/mcp/mcp_server.py, written with the SDK) for the
MCP plugin's tests: stdio servers the kernel starts, streamable HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import Event, Kernel
from soulacy.testing import Workspace

SERVER = Path(__file__).with_name("mcp_server.py")


def stdio_server(notes: Path, **more: Any) -> dict[str, Any]:
    """A ``mcp.servers.<id>`` entry that starts the test server over stdio."""
    return {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"NOTES": str(notes)},
        "backoff": ["100ms"],
        **more,
    }


def config(servers: dict[str, Any], **sections: Any) -> str:
    """config.yaml text with these MCP servers (JSON is YAML)."""
    return json.dumps({"mcp": {"servers": servers}, **sections})


def tool_results(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.type == "tool.result"]


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


def executed(notes: Path) -> list[str]:
    """The ``note`` calls the server really executed, in order."""
    return notes.read_text(encoding="utf-8").splitlines() if notes.exists() else []


class HttpServer:
    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def http_server(notes: Path) -> Iterator[Callable[..., HttpServer]]:
    """Start the test server over streamable HTTP (optionally requiring an X-Token, on a port
    given); every server started is stopped at the end of the test."""
    started: list[subprocess.Popen[str]] = []

    def start(token: str | None = None, port: int = 0) -> HttpServer:
        args = [sys.executable, str(SERVER), "http", token or "-", str(port)]
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, text=True, env={**os.environ, "NOTES": str(notes)}
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()  # the port, once it listens
        assert line.strip().isdigit(), f"the HTTP test server did not start: {line!r}"
        return HttpServer(process, int(line))

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture
def agent(workspace: Workspace) -> Callable[..., Path]:
    """A scripted agent using MCP servers: ``agent("a", steps, ["docs__add"], ["docs"])``."""

    def write(
        agent_id: str,
        steps: list[dict[str, Any]],
        tools: list[str],
        servers: list[str],
        **keys: Any,
    ) -> Path:
        return workspace.scripted_agent(agent_id, steps, tools=tools, mcp_servers=servers, **keys)

    return write


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    """A kernel whose only service is ``mcp``: no HTTP transport on a fixed port, and the
    kernel's in-memory store (these tests are about MCP, not SQLite)."""

    def make(*plugins: Any, **options: Any) -> Kernel:
        options.setdefault("plugins", ["no:http", "no:scheduler", "no:sqlite_store"])
        return make_kernel(extra_plugins=list(plugins), **options)

    return make
