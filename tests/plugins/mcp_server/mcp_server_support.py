"""Helpers of the MCP server's tests: the official MCP client SDK against Soulacy's MCP server,
over streamable HTTP (a real server on 127.0.0.1, the principals of
tests/_support/http_server.py) and over stdio (a real ``soulacy mcp serve --stdio`` process)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from soulacy.testing import Workspace

# Both eras of the protocol: the initialize handshake (what desktop clients speak today) and
# the 2026-07-28 revision's self-contained requests, which the client's "auto" mode probes for.
MODES = ["legacy", "auto"]


@asynccontextmanager
async def http_client(
    url: str, key: str | None, mode: str = "auto", statuses: list[int] | None = None
) -> AsyncIterator[Client]:
    """An MCP client of ``url``/mcp whose requests carry the bearer ``key``; the HTTP status
    of each answer is appended to ``statuses`` (the SDK's errors do not say it)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = httpx2.Timeout(30, read=120)

    async def note(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    hooks: dict[str, Any] = {"response": [note]}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http:
        transport = streamable_http_client(url.rstrip("/") + "/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:  # type: ignore[arg-type]
            yield client


def stdio_parameters(workspace: Workspace, **env: str) -> StdioServerParameters:
    """``soulacy mcp serve --stdio`` on ``workspace``, as a desktop client starts it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    launcher = ["-m", "soulacy.cli", "--workspace", str(workspace.path)]
    return StdioServerParameters(
        command=sys.executable,
        args=[*launcher, "mcp", "serve", "--stdio"],
        env={**environ, **env},
        cwd=str(workspace.path),
    )


def agents(workspace: Workspace) -> None:
    """An agent that answers, one that does not complete (one turn, spent on a tool call), a
    disabled one, and one whose id no MCP client takes for a tool name."""
    workspace.scripted_agent(
        "echo", [{"text": "hello there"}], repeat=True, description="Says hello."
    )
    workspace.scripted_agent(
        "short",
        [{"tool": "missing", "arguments": {}}, {"text": "never said"}],
        repeat=True,
        max_turns=1,
        description="Runs out of turns.",
    )
    workspace.scripted_agent("off", [{"text": "no"}], repeat=True, enabled=False)
    workspace.scripted_agent("two words", [{"text": "no"}], repeat=True)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")
