"""`soulacy run AGENT` starts only the MCP servers AGENT lists, so that another agent's server,
broken or slow, neither stops nor slows it (issue 38, observation 11; docs/mcp.md#lifecycle)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import config, stdio_server

from soulacy.testing import Workspace

Cli = Callable[..., subprocess.CompletedProcess[str]]


def _broken() -> dict[str, object]:
    """A server whose command does not exist: it never starts."""
    return {"command": sys.executable + "-no-such-program", "backoff": ["100ms"]}


@pytest.fixture
def two_agents(workspace: Workspace, notes: Path) -> Workspace:
    """``adder`` lists ``docs`` (a working server); ``other`` lists ``broken``; ``plain``
    lists none."""
    workspace.write_config(config({"docs": stdio_server(notes), "broken": _broken()}))
    workspace.scripted_agent(
        "adder",
        [{"tool": "docs__add", "arguments": {"a": 2, "b": 40}, "id": "c1"}, {"text": "42"}],
        mcp_servers=["docs"],
    )
    workspace.scripted_agent("other", [{"text": "never run"}], mcp_servers=["broken"])
    workspace.scripted_agent("plain", [{"text": "hello"}])
    return workspace


def test_another_agents_server_that_does_not_start_does_not_stop_a_run(
    two_agents: Workspace, soulacy_cli: Cli
) -> None:
    done = soulacy_cli(["run", "adder", "add", "--json"], cwd=two_agents.path)
    assert done.returncode == 0, done.stderr
    assert '"reply": "42"' in done.stdout
    assert "broken" not in done.stderr, f"expected 'broken' never started, got {done.stderr}"


def test_an_agent_without_mcp_servers_starts_none(two_agents: Workspace, soulacy_cli: Cli) -> None:
    done = soulacy_cli(["--log-level", "info", "run", "plain", "hi"], cwd=two_agents.path)
    assert done.returncode == 0, done.stderr
    assert "mcp server" not in done.stderr, f"expected no MCP server started: {done.stderr}"


def test_the_agents_own_server_that_does_not_start_fails_its_run(
    two_agents: Workspace, soulacy_cli: Cli
) -> None:
    done = soulacy_cli(["run", "other", "hi"], cwd=two_agents.path)
    assert done.returncode == 2
    assert "did not start: 'broken'" in done.stderr, done.stderr
    assert "'docs'" not in done.stderr


def test_another_agents_invalid_file_does_not_stop_a_run(
    two_agents: Workspace, soulacy_cli: Cli
) -> None:
    two_agents.write_agent("typo", "llm: {provider: scripted\n")
    done = soulacy_cli(["run", "plain", "hi"], cwd=two_agents.path)
    assert done.returncode == 0, done.stderr
