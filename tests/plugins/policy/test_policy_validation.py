"""Validation of the execution-policy keys: the timeout order, ranges, and errors that point at
the file, line and key that need fixing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace

Load = Callable[..., Kernel]


def nested_yaml(dotted: str, value: str) -> str:
    """``a.b.c`` and ``-1`` -> a block-style document with ``c: -1`` on line 3, column 5."""
    parts = dotted.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts[:-1])]
    lines.append(f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}")
    return "\n".join(lines) + "\n"


def timeouts_yaml(**timeouts: str) -> str:
    if not timeouts:
        return "runtime: {}\n"
    body = "".join(f"    {name}: '{value}'\n" for name, value in timeouts.items())
    return f"runtime:\n  timeouts:\n{body}"


# -- timeout order: tool <= llm <= step <= run <= http, "0" counting as infinity ----------------

TIMEOUT_ORDER = [
    pytest.param({}, [], id="the defaults 2m <= 5m <= 10m <= 48h <= 48h1m are in order"),
    pytest.param(
        {"tool": "1h", "llm": "1h", "step": "1h", "run": "1h", "http": "1h1m"},
        [],
        id="equal timeouts are in order",
    ),
    pytest.param(
        {"run": "1h", "http": "1h"},
        ["runtime.timeouts.http"],
        id="an HTTP timeout equal to the run cannot accommodate it",
    ),
    pytest.param({"tool": "10m"}, ["runtime.timeouts.llm"], id="tool <= llm"),
    pytest.param({"llm": "15m"}, ["runtime.timeouts.step"], id="llm <= step"),
    pytest.param({"step": "49h"}, ["runtime.timeouts.run"], id="step <= run"),
    pytest.param({"run": "72h"}, ["runtime.timeouts.http"], id="run <= http"),
    pytest.param(
        {"run": "72h", "http": "72h1m"}, [], id="a longer run with an HTTP timeout to match"
    ),
    pytest.param({"run": "0", "http": "0"}, [], id='run "0" with http "0" (unlimited runs)'),
    pytest.param({"run": "0"}, ["runtime.timeouts.http"], id='run "0" needs http "0"'),
    pytest.param({"http": "0"}, [], id='http "0" accommodates any run'),
    pytest.param(
        {"step": "0", "run": "0", "http": "0"},
        [],
        id="0 counts as infinity at the end of the order",
    ),
    pytest.param(
        {"llm": "0"},
        ["runtime.timeouts.step"],
        id="an unlimited llm timeout needs an unlimited step",
    ),
    pytest.param(
        {"tool": "0"},
        ["runtime.timeouts.llm"],
        id="an unlimited tool timeout needs an unlimited llm",
    ),
    pytest.param(
        {"tool": "0", "llm": "0", "step": "0", "run": "0", "http": "0"},
        [],
        id="everything unlimited is in order",
    ),
    pytest.param(
        {"tool": "1h", "http": "1m"},
        ["runtime.timeouts.llm", "runtime.timeouts.http"],
        id="every problem is reported at once",
    ),
]


@pytest.mark.parametrize(("timeouts", "problems"), TIMEOUT_ORDER)
def test_timeout_order(
    workspace: Workspace, make_kernel: Load, timeouts: dict[str, str], problems: list[str]
) -> None:
    workspace.write_config(timeouts_yaml(**timeouts))
    if not problems:
        kernel = make_kernel()
        for name, value in timeouts.items():
            assert str(kernel.config.get(f"runtime.timeouts.{name}")) == value
        order = ("tool", "llm", "step", "run", "http")
        seconds = [kernel.config.get(f"runtime.timeouts.{name}").seconds for name in order]
        as_infinity = [s or float("inf") for s in seconds]
        assert as_infinity == sorted(as_infinity)
        return
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert [issue.path for issue in caught.value.issues] == problems


def test_a_shorter_outer_timeout_names_the_inner_one(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.write_config(timeouts_yaml(llm="0"))
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    assert issue.path == "runtime.timeouts.step"
    assert issue.message.startswith("must be at least runtime.timeouts.llm (no deadline)")
    assert issue.value == "10m"


def test_an_http_timeout_that_cannot_accommodate_the_run_says_what_to_set(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.write_config("runtime:\n  timeouts:\n    run: 72h\n    http: 48h1m\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    assert issue.path == "runtime.timeouts.http"
    assert (issue.location.file, issue.location.line) == (str(workspace.path / "config.yaml"), 4)
    assert "cannot accommodate the run timeout (72h)" in issue.message
    assert 'set it to longer than 72h (e.g. "72h1m")' in issue.message
    assert '"0" means unlimited' in issue.message
    assert issue.value == "48h1m"


def test_an_http_timeout_equal_to_the_run_asks_for_a_longer_one(
    workspace: Workspace, make_kernel: Load
) -> None:
    """Equal would cut the reply off as the run ends: the message must not say "at least"."""
    workspace.write_config("runtime:\n  timeouts:\n    run: 2h\n    http: 2h\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    assert (issue.path, issue.location.line) == ("runtime.timeouts.http", 4)
    assert 'set it to longer than 2h (e.g. "2h1m")' in issue.message
    assert "at least 2h" not in issue.message


def test_an_unlimited_run_needs_an_unlimited_http_timeout(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.write_config("runtime:\n  timeouts:\n    run: '0'\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    assert issue.path == "runtime.timeouts.http"
    assert "cannot accommodate the run timeout (no deadline)" in issue.message
    assert 'set it to "0"' in issue.message


# -- ranges of config.yaml --------------------------------------------------------------------

WORKSPACE_NEGATIVES = [
    pytest.param("runtime.default_max_turns", "-1", "0 or more (0 means unlimited)"),
    pytest.param("runtime.max_turns_ceiling", "-1", "0 or more (0 means no ceiling)"),
    pytest.param("runtime.default_budget.max_tokens", "-1", "0 or more (0 means unlimited)"),
    pytest.param("runtime.default_budget.max_llm_calls", "-3", "0 or more (0 means unlimited)"),
    pytest.param("runtime.max_budget.max_tokens", "-1", "0 or more (0 means no ceiling)"),
    pytest.param("runtime.max_budget.max_llm_calls", "-1", "0 or more (0 means no ceiling)"),
    pytest.param("runtime.no_progress_limit", "-1", "0 or more (0 disables stall detection)"),
    pytest.param("costs.default_max_output_tokens", "-1", "0 or more"),
    pytest.param("costs.max_output_tokens_ceiling", "-100", "0 or more (0 means no ceiling)"),
    pytest.param("llm.studio.max_build_tokens", "-1", "0 or more (0 means unlimited)"),
    pytest.param("llm.studio.max_build_cost_usd", "-0.5", "0 or more (0 means unlimited)"),
    pytest.param(
        "llm.studio.max_build_attempts",
        "-2",
        "-1 or more (-1 means unlimited, 0 selects the default)",
    ),
]


@pytest.mark.parametrize(("key", "value", "expected"), WORKSPACE_NEGATIVES)
def test_a_negative_workspace_value_names_file_line_and_key(
    workspace: Workspace, make_kernel: Load, key: str, value: str, expected: str
) -> None:
    workspace.write_config(nested_yaml(key, value))
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    depth = key.count(".") + 1
    config_file = str(workspace.path / "config.yaml")
    assert issue.path == key
    assert (issue.location.file, issue.location.line) == (config_file, depth)
    assert f"{config_file}:{depth}:{2 * depth - 1}: {key}: expected {expected}" in str(caught.value)
    assert f"(got {float(value) if '.' in value else int(value)!r})" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("runtime.default_max_turns", "0"),
        pytest.param("runtime.max_turns_ceiling", "0"),
        pytest.param("runtime.default_budget.max_tokens", "0"),
        pytest.param("runtime.max_budget.max_llm_calls", "0"),
        pytest.param("runtime.no_progress_limit", "0"),
        pytest.param("costs.default_max_output_tokens", "0"),
        pytest.param("costs.max_output_tokens_ceiling", "0"),
        pytest.param("llm.studio.max_build_cost_usd", "0"),
        pytest.param("llm.studio.max_build_attempts", "-1"),
        pytest.param("llm.studio.max_build_elapsed", "'0'"),
        pytest.param("runtime.timeouts.http", "'0'"),
    ],
)
def test_the_smallest_allowed_value_loads(
    workspace: Workspace, make_kernel: Load, key: str, value: str
) -> None:
    workspace.write_config(nested_yaml(key, value))
    config = make_kernel().config
    assert config.is_set(key)
    got = config.get(key)
    assert getattr(got, "seconds", got) == int(value.strip("'"))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        pytest.param("runtime.timeouts.run", "-1h", "a duration cannot be negative"),
        pytest.param("runtime.timeouts.tool", "90", "a bare number needs a unit"),
        pytest.param("runtime.timeouts.llm", "soon", "expected a duration"),
        pytest.param("llm.studio.max_build_elapsed", "-5m", "a duration cannot be negative"),
        pytest.param("runtime.default_max_turns", "lots", "expected an integer, got a string"),
        pytest.param("runtime.default_max_turns", "true", "expected an integer, got a boolean"),
        pytest.param("runtime.max_turns_ceiling", "2.5", "expected an integer, got a number"),
        pytest.param("costs.default_max_output_tokens", "'16384'", "expected an integer"),
        pytest.param(
            "runtime.default_max_turn", "3", "unknown key; did you mean 'default_max_turns'?"
        ),
        pytest.param("runtime.default_budget.tokens", "3", "unknown key"),
    ],
)
def test_a_malformed_workspace_value_names_file_line_and_key(
    workspace: Workspace, make_kernel: Load, key: str, value: str, message: str
) -> None:
    workspace.write_config(nested_yaml(key, value))
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    (issue,) = caught.value.issues
    assert issue.path == key
    assert issue.location.line == key.count(".") + 1
    assert message in issue.message


def test_every_workspace_problem_is_reported_at_once(
    workspace: Workspace, make_kernel: Load
) -> None:
    workspace.write_config(
        "runtime:\n  default_max_turns: -1\n  max_budget:\n    max_tokens: -1\n"
        "costs:\n  max_output_tokens_ceiling: -1\n"
    )
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert [(i.path, i.location.line) for i in caught.value.issues] == [
        ("runtime.default_max_turns", 2),
        ("runtime.max_budget.max_tokens", 4),
        ("costs.max_output_tokens_ceiling", 6),
    ]


def test_a_negative_environment_value_names_the_variable(
    workspace: Workspace, make_kernel: Load
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_kernel(environ={"SOULACY_RUNTIME__MAX_TURNS_CEILING": "-1"})
    (issue,) = caught.value.issues
    assert issue.path == "runtime.max_turns_ceiling"
    assert str(issue.location) == "environment variable SOULACY_RUNTIME__MAX_TURNS_CEILING"


# -- ranges of SOUL.yaml ----------------------------------------------------------------------

AGENT_NEGATIVES = [
    pytest.param(
        "max_turns", "-2", "expected -1 or more (0 or omitted inherits, -1 requests unlimited)"
    ),
    pytest.param("budget.max_tokens", "-1", "expected 0 or more (0 requests unlimited)"),
    pytest.param("budget.max_llm_calls", "-1", "expected 0 or more (0 requests unlimited)"),
    pytest.param("no_progress_limit", "-1", "expected 0 or more (0 disables stall detection)"),
    pytest.param(
        "reasoning.max_steps", "-2", "expected -1 or more (omitted inherits, -1 is unlimited)"
    ),
    pytest.param("llm.max_tokens", "-1", "expected 0 or more"),
    pytest.param("run_timeout", "-1h", "a duration cannot be negative"),
    pytest.param("reasoning.step_timeout", "-1s", "a duration cannot be negative"),
    pytest.param("max_turns", "'many'", "expected an integer, got a string"),
    pytest.param("budget.max_token", "5", "unknown key; did you mean 'max_tokens'?"),
]


@pytest.mark.parametrize(("key", "value", "message"), AGENT_NEGATIVES)
def test_a_bad_agent_value_names_file_line_and_key(
    workspace: Workspace, make_kernel: Load, key: str, value: str, message: str
) -> None:
    soul = workspace.write_agent("a", "id: a\n" + nested_yaml(key, value))
    kernel = make_kernel()
    with pytest.raises(ConfigError) as caught:
        kernel.resolve_policy("a")
    (issue,) = caught.value.issues
    depth = key.count(".") + 1
    assert issue.path == key
    assert (issue.location.file, issue.location.line) == (str(soul), depth + 1)
    assert message in issue.message
    assert f"{soul}:{depth + 1}:" in str(caught.value)


@pytest.mark.parametrize(
    "agent",
    [
        pytest.param("max_turns: -1\n", id="max_turns -1"),
        pytest.param("max_turns: 0\n", id="max_turns 0"),
        pytest.param("budget: {max_tokens: 0, max_llm_calls: 0}\n", id="budget 0 / 0"),
        pytest.param("budget: {}\n", id="an empty budget"),
        pytest.param("budget:\n", id="a null budget"),
        pytest.param("no_progress_limit: 0\n", id="no_progress_limit 0"),
        pytest.param("reasoning: {max_steps: -1}\n", id="reasoning.max_steps -1"),
        pytest.param("run_timeout: '0'\n", id='run_timeout "0"'),
        pytest.param("llm: {max_tokens: 0}\n", id="llm.max_tokens 0"),
    ],
)
def test_the_allowed_agent_values_load(workspace: Workspace, make_kernel: Load, agent: str) -> None:
    workspace.write_agent("a", "id: a\n" + agent)
    kernel = make_kernel()
    key = agent.split(":", 1)[0]
    assert kernel.agent("a").is_set(key)
    assert kernel.resolve_policy("a").agent_id == "a"


def test_config_validate_reports_a_bad_agent(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    workspace.write_agent("good", {"max_turns": -1})
    soul = workspace.write_agent("bad", "id: bad\nmax_turns: -5\n")
    result = soulacy_cli("config", "validate")
    assert result.code == 2
    assert f"{soul}:2:1: max_turns: expected -1 or more" in result.err
