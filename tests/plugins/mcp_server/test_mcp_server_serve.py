"""A real ``soulacy serve`` process serves ``/mcp`` with no configuration of its own: the
plugin is on by default, and a call's run is the caller's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support.http_server import KEYS
from _support.serve_nodes import serving, start
from mcp_server_support import agents, http_client, text_of

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


async def test_soulacy_serve_serves_the_agents_as_mcp_tools_by_default(
    workspace: Workspace, tmp_path: Path
) -> None:
    workspace.write_config(f"server:\n  api_keys: {json.dumps(KEYS)}\n")
    agents(workspace)
    node = start(workspace, "serve", tmp_path, {})
    with serving([node]):
        async with http_client(node.url, KEYS["bob"]) as client:
            listed = await client.list_tools()
            result = await client.call_tool("echo", {"text": "hi"})
        assert result.meta is not None
        run_id = result.meta["run_id"]
        async with node.client(KEYS["bob"]) as bob, node.client(KEYS["alice"]) as alice:
            mine = (await bob.get(f"/runs/{run_id}")).json()
            theirs = await alice.get(f"/runs/{run_id}")
    assert sorted(tool.name for tool in listed.tools) == ["echo", "short"]
    assert text_of(result) == "hello there"
    assert mine["status"] == "completed"
    assert theirs.status_code == 404  # alice never sees bob's run
