"""An agent of the original format (``mcp_servers`` only, no ``tools:`` entry) uses an MCP
server's tools from the command line: ``soulacy run`` starts the servers runs need, and only
them (no HTTP port, no scheduler)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from conftest import config, stdio_server

from soulacy.testing import Workspace


def test_soulacy_run_uses_an_mcp_servers_tools_chosen_by_mcp_servers_alone(
    workspace: Workspace,
    notes: Path,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    # Were the HTTP transport started, it would say "Running on http" on stderr (port 1).
    workspace.write_config(config({"docs": stdio_server(notes)}, server={"port": 1}))
    workspace.scripted_agent(
        "adder",
        [
            {"tool": "docs__add", "arguments": {"a": 2, "b": 40}, "id": "c1"},
            {"text": "the sum is 42"},
        ],
        mcp_servers=["docs"],
    )
    done = soulacy_cli(["run", "adder", "add them", "--json"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    assert '"status": "completed"' in done.stdout
    assert '"reply": "the sum is 42"' in done.stdout
    assert "Running on http" not in done.stderr  # the HTTP transport was not started
