"""A real Soulacy HTTP server on 127.0.0.1 (port 0) for the transport tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from _support.http_server import KEYS, Server

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    if not (workspace.path / "config.yaml").exists():
        keys = ", ".join(f"{p}: {k}" for p, k in KEYS.items())
        workspace.write_config(f"server:\n  port: 0\n  api_keys: {{{keys}}}\n  admins: [root]\n")
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    workspace.scripted_agent(
        "tooly", [{"tool": "missing", "arguments": {}}, {"text": "done"}], repeat=True
    )
    kernel = make_kernel()
    async with open_kernel(kernel=kernel) as running:
        yield Server(running, running.started["http"][0])
