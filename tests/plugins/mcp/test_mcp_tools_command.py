"""``soulacy mcp tools`` lists the tools each configured MCP server offers (issue 38): each
server started once, as a run would start it, and asked; a server that does not start is its
own line and exit 1, not the end of the listing. Real server processes (conftest.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from conftest import config, stdio_server

from soulacy.testing import Workspace

Cli = Callable[..., subprocess.CompletedProcess[str]]


def test_it_lists_each_servers_tools_by_the_names_agents_use(
    workspace: Workspace, notes: Path, soulacy_cli: Cli
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    done = soulacy_cli(["mcp", "tools"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("docs (stdio): "), done.stdout
    assert lines[0].endswith(" tools"), done.stdout
    names = [line.split()[0] for line in lines[1:]]
    assert "docs__add" in names, done.stdout
    assert "docs__note" in names, done.stdout
    (add,) = [line for line in lines if line.split()[0] == "docs__add"]
    assert len(add.split()) > 1, f"expected the tool's description, got {add!r}"

    done = soulacy_cli(["mcp", "tools", "--json"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert (row["server"], row["transport"]) == ("docs", "stdio")
    by_name = {tool["name"]: tool for tool in row["tools"]}
    assert by_name["docs__add"]["server_name"] == "add"


def test_a_server_that_does_not_start_is_its_own_line_and_exit_1(
    workspace: Workspace, notes: Path, soulacy_cli: Cli
) -> None:
    broken = {"command": "/nonexistent/mcp-server", "startup_timeout": "20s"}
    workspace.write_config(config({"docs": stdio_server(notes), "broken": broken}))
    done = soulacy_cli(["mcp", "tools"], cwd=workspace.path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "broken (stdio): did not start: " in done.stdout, done.stdout
    assert "docs__add" in done.stdout, done.stdout  # the other server is still listed


def test_servers_named_only_and_an_unknown_name_is_a_usage_error(
    workspace: Workspace, notes: Path, soulacy_cli: Cli
) -> None:
    workspace.write_config(
        config({"docs": stdio_server(notes), "off": {**stdio_server(notes), "enabled": False}})
    )
    done = soulacy_cli(["mcp", "tools", "--json"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    assert [row["server"] for row in json.loads(done.stdout)] == ["docs"]  # enabled only
    done = soulacy_cli(["mcp", "tools", "off", "--json"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    assert [row["server"] for row in json.loads(done.stdout)] == ["off"]
    done = soulacy_cli(["mcp", "tools", "dcos"], cwd=workspace.path)
    assert done.returncode == 2, done.stdout
    assert "no MCP server 'dcos'" in done.stderr, done.stderr


def test_no_servers(workspace: Workspace, soulacy_cli: Cli) -> None:
    workspace.write_config("{}\n")
    done = soulacy_cli(["mcp", "tools"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    assert "no MCP servers" in done.stdout
