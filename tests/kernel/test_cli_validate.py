"""`soulacy config validate` checks what a run would check before it calls the model: each
agent's tools, its provider and its MCP servers, with a did-you-mean (issue 38, observation 7).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace

TOOLS = '''\
def add(numbers: list[float]) -> float:
    """Add up numbers."""
    return sum(numbers)


def check(expression: str) -> bool:
    """Check an expression."""
    return True
'''


@pytest.fixture
def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--workspace", str(workspace.path), *args], environ={})
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _agent(workspace: Workspace, agent_id: str, *, tools: list[str], **keys: Any) -> Path:
    path = workspace.scripted_agent(agent_id, [{"text": "done"}], tools=tools, **keys)
    (path.parent / "tools.py").write_text(TOOLS, encoding="utf-8")
    return path


def test_a_misspelt_tool_function_is_an_error_with_a_suggestion(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    _agent(workspace, "adder", tools=["tools.py:add", "tools.py:ad"])
    code, out, err = cli("config", "validate")
    assert code == 2, out
    assert "adder/SOUL.yaml:" in err, f"expected the SOUL.yaml line, got {err!r}"
    assert "tools.1: " in err, f"expected the entry's key, got {err!r}"
    assert "has no function 'ad'; did you mean 'add'?" in err, err


def test_a_misspelt_tool_file_is_an_error_with_a_suggestion(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    _agent(workspace, "adder", tools=["tool.py:add"])
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "did you mean 'tools.py:add'?" in err, err


def test_an_unknown_named_tool_is_an_error_that_suggests_the_file_tool(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    _agent(workspace, "adder", tools=["check"])
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "tools.0: no loaded plugin provides a tool named 'check'" in err, err
    assert "did you mean 'tools.py:check'?" in err, err


def test_a_misspelt_provider_is_an_error_with_a_suggestion(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_agent("bot", {"llm": {"provider": "scriptd", "model": "x.yaml"}})
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "bot/SOUL.yaml:" in err
    assert "llm.provider: unknown provider 'scriptd'" in err, err
    assert "did you mean 'scripted'?" in err, err


def test_a_misspelt_workspace_provider_is_reported_in_config_yaml(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("llm:\n  default:\n    provider: scriptd\n")
    workspace.write_agent("bot", {"name": "Bot"})
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "config.yaml:3:5: llm.default.provider: unknown provider 'scriptd'" in err, err
    assert "the provider of agent 'bot'; did you mean 'scripted'?" in err, err


def test_every_problem_of_every_agent_is_reported_in_one_run(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    _agent(workspace, "one", tools=["tools.py:ad"])
    workspace.write_agent("two", {"llm": {"provider": "scriptd"}})
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "(2 problems)" in err, err


def test_a_workspace_that_runs_is_valid(workspace: Workspace, cli: Callable[..., Any]) -> None:
    _agent(workspace, "adder", tools=["tools.py:add", "tools.py:check"])
    code, out, err = cli("config", "validate")
    assert (code, err) == (0, "")
    assert "1 agent file(s) are valid" in out
    assert not (workspace.path / "soulacy.db").exists(), "validating stores nothing"


def test_an_agent_without_any_provider_is_valid_with_a_warning(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_agent("bot", {"name": "Bot"})
    code, out, err = cli("config", "validate")
    assert code == 0, err
    assert "1 agent file(s) are valid" in out
    assert "warning: agent 'bot' names no llm.provider" in err, err


def test_the_run_says_the_same_as_validate(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    _agent(workspace, "adder", tools=["tools.py:ad"])
    done = soulacy_cli(["run", "adder", "hi"], cwd=workspace.path)
    assert done.returncode == 2
    assert "has no function 'ad'; did you mean 'add'?" in done.stderr, done.stderr


def test_a_misspelt_mcp_server_is_an_error_with_a_suggestion(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    pytest.importorskip("mcp")
    server = {"command": sys.executable, "args": ["-c", "pass"], "enabled": False}
    workspace.write_config({"mcp": {"servers": {"docs": server}}})
    workspace.write_agent("bot", {"llm": {"provider": "scripted"}, "mcp_servers": ["doc"]})
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "unknown MCP server 'doc'" in err, err
    assert "did you mean 'docs'?" in err, err


def test_a_disabled_agents_problems_are_warnings(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    _agent(workspace, "parked", tools=["tools.py:ad"], enabled=False)
    code, _, err = cli("config", "validate")
    assert code == 0, err
    assert "warning: " in err
    assert "did you mean 'add'? (agent 'parked' is disabled)" in err, err


def test_an_mcp_tool_is_checked_by_its_servers_name_without_starting_it(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    pytest.importorskip("mcp")
    never = {"command": "/nonexistent/mcp-server"}  # started, it would fail
    workspace.write_config({"mcp": {"servers": {"docs": never}}})
    workspace.write_agent(
        "bot",
        {"llm": {"provider": "scripted"}, "mcp_servers": ["docs"], "tools": ["docs__search"]},
    )
    code, out, err = cli("config", "validate")
    assert (code, err) == (0, ""), err
    assert "1 agent file(s) are valid" in out
