"""The table "Defaults and overrides" of the specification (section "Execution policy").

One parametrized case per row: first the "New default" column (an empty workspace), then the
"Override semantics" column. Test ids are the specification's own wording.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import Duration, Kernel
from soulacy.plugins.policy import ExecutionPolicy, ModelCapacity

HOURS = 3600.0

# (setting, its new default in config.yaml terms) -- the first two columns of the table.
NEW_DEFAULTS = [
    pytest.param("runtime.default_max_turns", 256, id="runtime.default_max_turns | 256"),
    pytest.param("runtime.max_turns_ceiling", 0, id="runtime.max_turns_ceiling | 0"),
    pytest.param(
        "runtime.default_budget.max_tokens",
        0,
        id="runtime.default_budget.max_tokens / max_llm_calls | 0 / 0 (max_tokens)",
    ),
    pytest.param(
        "runtime.default_budget.max_llm_calls",
        0,
        id="runtime.default_budget.max_tokens / max_llm_calls | 0 / 0 (max_llm_calls)",
    ),
    pytest.param(
        "runtime.max_budget.max_tokens",
        0,
        id="runtime.max_budget.max_tokens / max_llm_calls | 0 / 0 (max_tokens)",
    ),
    pytest.param(
        "runtime.max_budget.max_llm_calls",
        0,
        id="runtime.max_budget.max_tokens / max_llm_calls | 0 / 0 (max_llm_calls)",
    ),
    pytest.param(
        "costs.default_max_output_tokens", 16384, id="costs.default_max_output_tokens | 16384"
    ),
    pytest.param("costs.max_output_tokens_ceiling", 0, id="costs.max_output_tokens_ceiling | 0"),
    pytest.param("runtime.timeouts.run", Duration(48 * HOURS), id="runtime.timeouts.run | 48h"),
    pytest.param(
        "runtime.timeouts.http", Duration(48 * HOURS + 60), id="runtime.timeouts.http | 48h1m"
    ),
    pytest.param(
        "runtime.timeouts.llm", Duration(300), id="runtime.timeouts.llm / step / tool | 5m (llm)"
    ),
    pytest.param(
        "runtime.timeouts.step",
        Duration(600),
        id="runtime.timeouts.llm / step / tool | 10m (step)",
    ),
    pytest.param(
        "runtime.timeouts.tool",
        Duration(120),
        id="runtime.timeouts.llm / step / tool | 2m (tool)",
    ),
    pytest.param(
        "llm.studio.max_build_tokens",
        0,
        id="llm.studio.max_build_tokens / max_build_cost_usd | 0 / 0 (tokens)",
    ),
    pytest.param(
        "llm.studio.max_build_cost_usd",
        0,
        id="llm.studio.max_build_tokens / max_build_cost_usd | 0 / 0 (cost)",
    ),
    pytest.param("llm.studio.max_build_attempts", 32, id="llm.studio.max_build_attempts | 32"),
    pytest.param(
        "llm.studio.max_build_elapsed",
        Duration(48 * HOURS),
        id="llm.studio.max_build_elapsed | 48h",
    ),
    pytest.param(
        "runtime.no_progress_limit",
        20,
        id="Twenty consecutive repeated results stop the run (runtime.no_progress_limit | 20)",
    ),
]


@pytest.mark.parametrize(("key", "default"), NEW_DEFAULTS)
def test_new_default_of_an_empty_workspace(kernel: Kernel, key: str, default: Any) -> None:
    value = kernel.config.get(key)
    assert value == default
    assert type(value) is type(default) or {type(value), type(default)} == {int, float}
    # Absent, not written: a default is distinguishable from the same value saved explicitly.
    assert not kernel.config.is_set(key)
    assert kernel.config.source_of(key) is None


# (policy field, resolved value in seconds/tokens or None for unlimited) of an agent without
# any policy key in an empty workspace.
RESOLVED_DEFAULTS = [
    pytest.param("max_turns", 256, id="runtime.default_max_turns | 256"),
    pytest.param(
        "reasoning_max_steps", 256, id="reasoning steps inherit the workspace turn allowance"
    ),
    pytest.param("max_tokens", None, id="runtime.default_budget.max_tokens | 0 means unlimited"),
    pytest.param(
        "max_llm_calls", None, id="runtime.default_budget.max_llm_calls | 0 means unlimited"
    ),
    pytest.param(
        "max_output_tokens", 16384, id="costs.default_max_output_tokens | 16384 per response"
    ),
    pytest.param("run_timeout", 48 * HOURS, id="runtime.timeouts.run | 48h"),
    pytest.param("http_timeout", 48 * HOURS + 60, id="runtime.timeouts.http | 48h1m"),
    pytest.param("llm_timeout", 300, id="runtime.timeouts.llm | 5m"),
    pytest.param("step_timeout", 600, id="runtime.timeouts.step | 10m"),
    pytest.param("tool_timeout", 120, id="runtime.timeouts.tool | 2m"),
    pytest.param("max_build_tokens", None, id="llm.studio.max_build_tokens | 0 (no limit)"),
    pytest.param("max_build_cost_usd", None, id="llm.studio.max_build_cost_usd | 0 (no limit)"),
    pytest.param("max_build_attempts", 32, id="llm.studio.max_build_attempts | 32"),
    pytest.param("max_build_elapsed", 48 * HOURS, id="llm.studio.max_build_elapsed | 48h"),
    pytest.param("no_progress_limit", 20, id="no_progress_limit inherits a default of 20"),
]


@pytest.mark.parametrize(("field", "expected"), RESOLVED_DEFAULTS)
def test_resolved_default_of_an_agent_without_policy_keys(
    resolve_policy: Callable[..., ExecutionPolicy], field: str, expected: float | None
) -> None:
    limit = resolve_policy().limit(field)
    assert limit.value == expected
    assert limit.unlimited is (expected is None)
    assert limit.source == "default"
    assert limit.location is None


def test_no_ceiling_applies_by_default(resolve_policy: Callable[..., ExecutionPolicy]) -> None:
    """runtime.max_turns_ceiling | 0, max_budget 0 / 0, max_output_tokens_ceiling 0: none caps."""
    policy = resolve_policy(
        agent={"max_turns": -1, "budget": {"max_tokens": 0, "max_llm_calls": 0}},
        overrides={"max_output_tokens": 10**9},
    )
    assert policy.max_turns.unlimited
    assert policy.reasoning_max_steps.unlimited
    assert policy.max_tokens.unlimited
    assert policy.max_llm_calls.unlimited
    assert policy.max_output_tokens.value == 10**9
    assert all(limit.source != "ceiling" for limit in policy.limits().values())


# The "Override semantics" column: (config.yaml, SOUL.yaml, request, model capacity,
# {field: (value or None for unlimited, source)}).
Expect = dict[str, tuple[float | None, str]]
SEMANTICS = [
    pytest.param(
        {"runtime": {"default_max_turns": 0}},
        None,
        None,
        None,
        {"max_turns": (None, "config.yaml"), "reasoning_max_steps": (None, "config.yaml")},
        id="runtime.default_max_turns: 0 means unlimited",
    ),
    pytest.param(
        {"runtime": {"default_max_turns": 40}},
        None,
        None,
        None,
        {"max_turns": (40, "config.yaml")},
        id="runtime.default_max_turns: a positive value is every agent's default",
    ),
    pytest.param(
        {"runtime": {"max_turns_ceiling": 50}},
        {"max_turns": -1},
        None,
        None,
        {"max_turns": (50, "ceiling"), "reasoning_max_steps": (50, "ceiling")},
        id="runtime.max_turns_ceiling: Positive values cap all agents,"
        " including unlimited requests (SOUL.yaml -1)",
    ),
    pytest.param(
        {"runtime": {"max_turns_ceiling": 50}},
        None,
        {"max_turns": -1},
        None,
        {"max_turns": (50, "ceiling")},
        id="runtime.max_turns_ceiling: Positive values cap all agents,"
        " including unlimited requests (request -1)",
    ),
    pytest.param(
        {"runtime": {"max_turns_ceiling": 50}},
        None,
        None,
        None,
        {"max_turns": (50, "ceiling")},
        id="runtime.max_turns_ceiling: Positive values cap all agents (the 256 default)",
    ),
    pytest.param(
        {"runtime": {"max_turns_ceiling": 50}},
        {"max_turns": 12},
        None,
        None,
        {"max_turns": (12, "SOUL.yaml")},
        id="runtime.max_turns_ceiling: a shorter agent limit stays as saved",
    ),
    pytest.param(
        {"runtime": {"default_budget": {"max_tokens": 0, "max_llm_calls": 30}}},
        None,
        None,
        None,
        {"max_tokens": (None, "config.yaml"), "max_llm_calls": (30, "config.yaml")},
        id="runtime.default_budget.max_tokens / max_llm_calls:"
        " 0 means unlimited for that dimension",
    ),
    pytest.param(
        {"runtime": {"max_budget": {"max_tokens": 1000, "max_llm_calls": 0}}},
        {"budget": {"max_tokens": 0, "max_llm_calls": 0}},
        None,
        None,
        {"max_tokens": (1000, "ceiling"), "max_llm_calls": (None, "SOUL.yaml")},
        id="runtime.max_budget.max_tokens / max_llm_calls: Optional workspace ceilings",
    ),
    pytest.param(
        {"runtime": {"default_budget": {"max_tokens": 5000}, "max_budget": {"max_tokens": 800}}},
        None,
        None,
        None,
        {"max_tokens": (800, "ceiling")},
        id="runtime.max_budget.max_tokens: the ceiling caps the workspace default too",
    ),
    pytest.param(
        None,
        None,
        None,
        ModelCapacity(context_window=128000, max_output_tokens=8192),
        {
            "max_output_tokens": (8192, "model capacity"),
            "context_window": (128000, "model capacity"),
        },
        id="costs.default_max_output_tokens: Per-response allowance; model capacity still applies",
    ),
    pytest.param(
        {"costs": {"default_max_output_tokens": 0}},
        None,
        None,
        ModelCapacity(max_output_tokens=65536),
        {"max_output_tokens": (65536, "model capacity")},
        id="costs.default_max_output_tokens: 0 leaves it to the model's capacity",
    ),
    pytest.param(
        {"costs": {"max_output_tokens_ceiling": 4000}},
        {"llm": {"max_tokens": 100000}},
        None,
        None,
        {"max_output_tokens": (4000, "ceiling")},
        id="costs.max_output_tokens_ceiling: Optional workspace output ceiling",
    ),
    pytest.param(
        {"runtime": {"timeouts": {"run": "0", "http": "0"}}},
        None,
        None,
        None,
        {
            "run_timeout": (None, "config.yaml"),
            "http_timeout": (None, "config.yaml"),
            "reasoning_total_timeout": (None, "config.yaml"),
        },
        id='runtime.timeouts.run: "0" means no practical deadline',
    ),
    pytest.param(
        None,
        {"run_timeout": "100h"},
        None,
        None,
        {
            "run_timeout": (100 * HOURS, "SOUL.yaml"),
            "http_timeout": (100 * HOURS + 60, "accommodates run"),
        },
        id="runtime.timeouts.http: Must accommodate the run (a longer agent run)",
    ),
    pytest.param(
        None,
        {"run_timeout": "0"},
        None,
        None,
        {"run_timeout": (None, "SOUL.yaml"), "http_timeout": (None, "accommodates run")},
        id='runtime.timeouts.http: Must accommodate the run; use "0" for unlimited runs',
    ),
    pytest.param(
        {"runtime": {"timeouts": {"tool": "30s", "llm": "7m", "step": "20m"}}},
        None,
        None,
        None,
        {
            "tool_timeout": (30, "config.yaml"),
            "llm_timeout": (420, "config.yaml"),
            "step_timeout": (1200, "config.yaml"),
            "run_timeout": (48 * HOURS, "default"),
        },
        id="runtime.timeouts.llm / step / tool: Individual operation timeouts,"
        " separately configurable",
    ),
    pytest.param(
        {"llm": {"studio": {"max_build_tokens": 50000, "max_build_cost_usd": 2.5}}},
        None,
        None,
        None,
        {"max_build_tokens": (50000, "config.yaml"), "max_build_cost_usd": (2.5, "config.yaml")},
        id="llm.studio.max_build_tokens / max_build_cost_usd: Optional per-build token/spend"
        " limits",
    ),
    pytest.param(
        {"llm": {"studio": {"max_build_attempts": -1}}},
        None,
        None,
        None,
        {"max_build_attempts": (None, "config.yaml")},
        id="llm.studio.max_build_attempts: -1 means unlimited",
    ),
    pytest.param(
        {"llm": {"studio": {"max_build_attempts": 0}}},
        None,
        None,
        None,
        {"max_build_attempts": (32, "config.yaml")},
        id="llm.studio.max_build_attempts: 0 selects the default",
    ),
    pytest.param(
        {"llm": {"studio": {"max_build_attempts": 5}}},
        None,
        None,
        None,
        {"max_build_attempts": (5, "config.yaml")},
        id="llm.studio.max_build_attempts: a positive value is the allowance",
    ),
    pytest.param(
        {"llm": {"studio": {"max_build_elapsed": "0"}}},
        None,
        None,
        None,
        {"max_build_elapsed": (None, "config.yaml")},
        id='llm.studio.max_build_elapsed: "0" means no practical elapsed-time limit',
    ),
    pytest.param(
        {"runtime": {"no_progress_limit": 0}},
        None,
        None,
        None,
        {"no_progress_limit": (None, "config.yaml")},
        id="no_progress_limit: 0 disables it (workspace)",
    ),
]


@pytest.mark.parametrize(("config", "agent", "overrides", "capacity", "expected"), SEMANTICS)
def test_override_semantics(
    resolve_policy: Callable[..., ExecutionPolicy],
    config: dict[str, Any] | None,
    agent: dict[str, Any] | None,
    overrides: dict[str, Any] | None,
    capacity: ModelCapacity | None,
    expected: Expect,
) -> None:
    policy = resolve_policy(config, agent, overrides, capacity)
    got = {field: (policy.limit(field).value, policy.limit(field).source) for field in expected}
    assert got == expected
    for field, (value, _) in expected.items():
        assert policy.limit(field).unlimited is (value is None)


def test_max_build_attempts_zero_says_why(resolve_policy: Callable[..., ExecutionPolicy]) -> None:
    """llm.studio.max_build_attempts: 0 selects the default -- and the policy says so."""
    limit = resolve_policy("llm:\n  studio:\n    max_build_attempts: 0\n").limit(
        "max_build_attempts"
    )
    assert limit.value == 32
    assert limit.source == "config.yaml"
    assert limit.reason == "0 selects the default"
    assert limit.location is not None
    assert limit.location.endswith("config.yaml:3:5")
