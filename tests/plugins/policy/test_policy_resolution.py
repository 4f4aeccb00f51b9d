"""How one run's execution policy is resolved: request -> SOUL.yaml -> config.yaml -> default,
then ceilings and the model's capacity. Test ids quote the specification's sentences.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import attrs
import pytest

from soulacy.kernel import ConfigError, Kernel, PluginError, UsageError, hookimpl
from soulacy.plugins.policy import ExecutionPolicy, Limit, ModelCapacity, resolve
from soulacy.testing import HookRecorder, Workspace, throwaway_plugin

Resolve = Callable[..., ExecutionPolicy]
HOURS = 3600.0

WORKSPACE = {
    "runtime": {
        "default_max_turns": 40,
        "max_turns_ceiling": 0,
        "default_budget": {"max_tokens": 9000, "max_llm_calls": 7},
        "no_progress_limit": 11,
        "timeouts": {"run": "2h", "http": "2h1m"},
    }
}
CEILINGS = {
    "runtime": {
        "max_turns_ceiling": 30,
        "max_budget": {"max_tokens": 5000, "max_llm_calls": 4},
    }
}

# -- the agent sentences ----------------------------------------------------------------------

# (sentence, config.yaml, SOUL.yaml policy keys, {field: (value or None, source)})
AGENT_SENTENCES = [
    pytest.param(
        WORKSPACE,
        {},
        {"max_turns": (40, "config.yaml")},
        id="Agent max_turns: omitted inherits the workspace value",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": 0},
        {"max_turns": (40, "config.yaml")},
        id="Agent max_turns: 0 inherits the workspace value",
    ),
    pytest.param(
        None,
        {"max_turns": 0},
        {"max_turns": (256, "default")},
        id="Agent max_turns: 0 inherits the workspace value (the 256 default)",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": -1},
        {"max_turns": (None, "SOUL.yaml"), "reasoning_max_steps": (None, "SOUL.yaml")},
        id="Agent max_turns: -1 requests unlimited turns",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": 500},
        {"max_turns": (500, "SOUL.yaml")},
        id="Agent max_turns: an explicit value is authoritative",
    ),
    pytest.param(
        WORKSPACE,
        {},
        {"max_tokens": (9000, "config.yaml"), "max_llm_calls": (7, "config.yaml")},
        id="An omitted budget inherits the workspace default.",
    ),
    pytest.param(
        WORKSPACE,
        {"budget": {"max_tokens": 100}},
        {"max_tokens": (100, "SOUL.yaml"), "max_llm_calls": (7, "config.yaml")},
        id="An omitted budget dimension inherits the workspace default.",
    ),
    pytest.param(
        WORKSPACE,
        {"budget": {"max_tokens": 0, "max_llm_calls": 0}},
        {"max_tokens": (None, "SOUL.yaml"), "max_llm_calls": (None, "SOUL.yaml")},
        id="An explicit budget with zero values requests unlimited tokens/calls",
    ),
    pytest.param(
        CEILINGS,
        {"budget": {"max_tokens": 0, "max_llm_calls": 0}},
        {"max_tokens": (5000, "ceiling"), "max_llm_calls": (4, "ceiling")},
        id="An explicit budget with zero values requests unlimited tokens/calls,"
        " subject to positive workspace ceilings.",
    ),
    pytest.param(
        CEILINGS,
        {"budget": {"max_tokens": 10, "max_llm_calls": 2}},
        {"max_tokens": (10, "SOUL.yaml"), "max_llm_calls": (2, "SOUL.yaml")},
        id="Saved custom agents can still have shorter limits",
    ),
    pytest.param(
        WORKSPACE,
        {},
        {
            "run_timeout": (2 * HOURS, "config.yaml"),
            "http_timeout": (2 * HOURS + 60, "config.yaml"),
        },
        id="run_timeout is inherited when absent",
    ),
    pytest.param(
        WORKSPACE,
        {"run_timeout": "0"},
        {"run_timeout": (None, "SOUL.yaml"), "http_timeout": (None, "accommodates run")},
        id='run_timeout accepts "0"',
    ),
    pytest.param(
        WORKSPACE,
        {"run_timeout": 0},
        {"run_timeout": (None, "SOUL.yaml")},
        id="run_timeout accepts a bare 0 as YAML writes it",
    ),
    pytest.param(
        WORKSPACE,
        {"run_timeout": "30m"},
        {"run_timeout": (1800, "SOUL.yaml"), "http_timeout": (2 * HOURS + 60, "config.yaml")},
        id="run_timeout: a shorter agent deadline keeps the workspace HTTP timeout",
    ),
    pytest.param(
        WORKSPACE,
        {"reasoning": {"max_steps": 9}},
        {"reasoning_max_steps": (9, "SOUL.yaml"), "max_turns": (40, "config.yaml")},
        id="An explicit reasoning.max_steps controls reasoning iterations",
    ),
    pytest.param(
        WORKSPACE,
        {"reasoning": {"max_steps": -1}},
        {"reasoning_max_steps": (None, "SOUL.yaml")},
        id="An explicit reasoning.max_steps controls reasoning iterations; -1 is unlimited.",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": 15},
        {"reasoning_max_steps": (15, "SOUL.yaml")},
        id="An omitted reasoning.max_steps follows the agent's turn allowance",
    ),
    pytest.param(
        CEILINGS,
        {"reasoning": {"max_steps": -1}},
        {"reasoning_max_steps": (30, "ceiling")},
        id="Workspace turn ceilings still apply to reasoning. (-1)",
    ),
    pytest.param(
        CEILINGS,
        {"reasoning": {"max_steps": 1000}},
        {"reasoning_max_steps": (30, "ceiling")},
        id="Workspace turn ceilings still apply to reasoning. (explicit steps)",
    ),
    pytest.param(
        WORKSPACE,
        {},
        {"no_progress_limit": (11, "config.yaml")},
        id="no_progress_limit inherits the workspace value",
    ),
    pytest.param(
        None,
        {},
        {"no_progress_limit": (20, "default")},
        id="Twenty consecutive repeated results stop the run as incomplete.",
    ),
    pytest.param(
        WORKSPACE,
        {"no_progress_limit": 3},
        {"no_progress_limit": (3, "SOUL.yaml")},
        id="Set no_progress_limit on the agent to tune the threshold",
    ),
    pytest.param(
        WORKSPACE,
        {"no_progress_limit": 0},
        {"no_progress_limit": (None, "SOUL.yaml")},
        id="Set no_progress_limit on the agent ... or 0 to disable it",
    ),
    pytest.param(
        WORKSPACE,
        {"llm": {"max_tokens": 2000}},
        {"max_output_tokens": (2000, "SOUL.yaml")},
        id="An agent's llm.max_tokens is its per-response allowance",
    ),
    pytest.param(
        WORKSPACE,
        {"llm": {"max_tokens": 0}},
        {"max_output_tokens": (16384, "default")},
        id="New agents inherit output allowances (llm.max_tokens 0)",
    ),
]


@pytest.mark.parametrize(("config", "agent", "expected"), AGENT_SENTENCES)
def test_agent_policy_keys(
    resolve_policy: Resolve,
    config: dict[str, Any] | None,
    agent: dict[str, Any],
    expected: dict[str, tuple[float | None, str]],
) -> None:
    policy = resolve_policy(config, {"id": "a", **agent})
    got = {name: (policy.limit(name).value, policy.limit(name).source) for name in expected}
    assert got == expected


def test_no_progress_zero_says_it_disables(resolve_policy: Resolve) -> None:
    limit = resolve_policy(None, "id: a\nno_progress_limit: 0\n").no_progress_limit
    assert limit.unlimited
    assert limit.reason == "0 disables stall detection"
    assert limit.location is not None
    assert limit.location.endswith("SOUL.yaml:2:1")


def test_a_capped_limit_says_which_ceiling_and_what_was_asked(resolve_policy: Resolve) -> None:
    policy = resolve_policy("runtime:\n  max_turns_ceiling: 30\n", "id: a\nmax_turns: -1\n")
    assert policy.max_turns.value == 30
    assert policy.max_turns.location is not None
    assert policy.max_turns.location.endswith("config.yaml:2:3")
    assert policy.max_turns.reason == (
        "runtime.max_turns_ceiling = 30 caps every agent (asked: unlimited, SOUL.yaml)"
    )


# -- explicit saved settings are authoritative ------------------------------------------------

OLD_DEFAULTS = """\
runtime:
  default_max_turns: 20
  max_turns_ceiling: 50
  default_budget:
    max_tokens: 100000
    max_llm_calls: 20
"""


def test_saved_old_defaults_remain_authoritative(
    workspace: Workspace, resolve_policy: Resolve
) -> None:
    """Updating the application does not erase budgets already present in config.yaml."""
    policy = resolve_policy(OLD_DEFAULTS)
    config_file = str(workspace.path / "config.yaml")
    expected = {
        "max_turns": (20, f"{config_file}:2:3"),
        "max_tokens": (100000, f"{config_file}:5:5"),
        "max_llm_calls": (20, f"{config_file}:6:5"),
    }
    for name, (value, location) in expected.items():
        limit = policy.limit(name)
        assert (limit.value, limit.source, limit.location) == (value, "config.yaml", location)


def test_saved_old_ceiling_still_caps_unlimited_requests(resolve_policy: Resolve) -> None:
    policy = resolve_policy(OLD_DEFAULTS, {"max_turns": -1}, {"max_turns": -1})
    assert policy.max_turns.value == 50
    assert policy.max_turns.source == "ceiling"


@pytest.mark.parametrize(
    ("key", "text", "field"),
    [
        pytest.param(
            "runtime.default_max_turns", "runtime:\n  default_max_turns: 256\n", "max_turns"
        ),
        pytest.param(
            "costs.default_max_output_tokens",
            "costs:\n  default_max_output_tokens: 16384\n",
            "max_output_tokens",
        ),
        pytest.param(
            "runtime.timeouts.run", "runtime:\n  timeouts:\n    run: 48h\n", "run_timeout"
        ),
        pytest.param(
            "runtime.default_budget.max_tokens",
            "runtime:\n  default_budget:\n    max_tokens: 0\n",
            "max_tokens",
        ),
    ],
)
def test_absent_and_explicitly_set_to_the_default_are_distinguishable(
    workspace: Workspace, make_kernel: Callable[..., Kernel], key: str, text: str, field: str
) -> None:
    workspace.write_agent("a", {"id": "a"})
    absent_kernel = make_kernel()
    absent = absent_kernel.resolve_policy("a").limit(field)
    workspace.write_config(text)
    explicit_kernel = make_kernel()
    explicit = explicit_kernel.resolve_policy("a").limit(field)

    assert explicit.value == absent.value  # the same value...
    assert not absent_kernel.config.is_set(key)
    assert explicit_kernel.config.is_set(key)
    assert (absent.source, absent.location) == ("default", None)  # ...from different sources
    assert explicit.source == "config.yaml"
    line = text.count("\n")
    assert explicit.location is not None
    assert explicit.location.startswith(f"{workspace.path / 'config.yaml'}:{line}:")


def test_an_environment_variable_is_its_own_source(
    make_kernel: Callable[..., Kernel], workspace: Workspace
) -> None:
    workspace.write_config(OLD_DEFAULTS)
    workspace.write_agent("a", {"id": "a"})
    kernel = make_kernel(environ={"SOULACY_RUNTIME__DEFAULT_MAX_TURNS": "33"})
    limit = kernel.resolve_policy("a").max_turns
    assert (limit.value, limit.source) == (33, "environment")
    assert limit.location == "environment variable SOULACY_RUNTIME__DEFAULT_MAX_TURNS"


def test_agent_values_name_their_line(workspace: Workspace, resolve_policy: Resolve) -> None:
    agent = "id: a\nmax_turns: 12\nbudget:\n  max_llm_calls: 3\nrun_timeout: '0'\n"
    policy = resolve_policy(None, agent)
    soul = str(workspace.path / "agents" / "a" / "SOUL.yaml")
    assert policy.max_turns.location == f"{soul}:2:1"
    assert policy.max_llm_calls.location == f"{soul}:4:3"
    assert policy.run_timeout.location == f"{soul}:5:1"


# -- model capacity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "agent", "overrides", "capacity", "expected"),
    [
        pytest.param(
            None, {}, None, 8192, 8192, id="model capacity wins over the 16384 default allowance"
        ),
        pytest.param(
            None, {}, None, 100000, 16384, id="a larger capacity leaves the allowance as it is"
        ),
        pytest.param(
            None,
            {"llm": {"max_tokens": 50000}},
            None,
            32000,
            32000,
            id="model capacity wins over an agent's llm.max_tokens",
        ),
        pytest.param(None, {}, {"max_output_tokens": 64000}, 32000, 32000, id="and over a request"),
        pytest.param(
            {"costs": {"max_output_tokens_ceiling": 8000}},
            {},
            None,
            4000,
            4000,
            id="and over a higher workspace ceiling",
        ),
        pytest.param(
            {"costs": {"default_max_output_tokens": 0}},
            {},
            None,
            12345,
            12345,
            id="and fills in an unlimited allowance",
        ),
    ],
)
def test_model_capacity_wins_over_output_allowances(
    resolve_policy: Resolve,
    config: dict[str, Any] | None,
    agent: dict[str, Any],
    overrides: dict[str, Any] | None,
    capacity: int,
    expected: int,
) -> None:
    policy = resolve_policy(
        config, {"id": "a", **agent}, overrides, ModelCapacity(max_output_tokens=capacity)
    )
    limit = policy.max_output_tokens
    assert limit.value == expected
    if expected == capacity:
        assert limit.source == "model capacity"
        assert limit.reason is not None
        assert f"the model produces at most {capacity} tokens per response" in limit.reason
    else:
        assert limit.source != "model capacity"


def test_model_capacity_is_asked_for_the_agents_provider_and_model(
    workspace: Workspace, make_kernel: Callable[..., Kernel], capacity_plugin: Callable[..., Any]
) -> None:
    calls: list[tuple[str | None, str | None]] = []
    workspace.write_agent("a", {"llm": {"provider": "acme", "model": "m-large"}})
    plugin = capacity_plugin(ModelCapacity(context_window=200000, max_output_tokens=4096), calls)
    policy = make_kernel(extra_plugins=[plugin]).resolve_policy("a")
    assert calls == [("acme", "m-large")]
    assert policy.max_output_tokens.reason == (
        "the model produces at most 4096 tokens per response (asked: 16384, default)"
    )
    assert (policy.context_window.value, policy.context_window.source) == (200000, "model capacity")


def test_unknown_capacity_says_so(resolve_policy: Resolve) -> None:
    policy = resolve_policy(capacity=None)
    assert policy.context_window.unlimited
    assert policy.context_window.source == "unknown"
    assert policy.context_window.reason == "the provider reports no context window"


# -- request overrides ------------------------------------------------------------------------

# (config.yaml, SOUL.yaml, request, {field: (value or None, source)})
REQUESTS = [
    pytest.param(
        WORKSPACE,
        {"max_turns": 12},
        {"max_turns": -1},
        {"max_turns": (None, "request"), "reasoning_max_steps": (None, "request")},
        id="request max_turns: -1 requests unlimited turns",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": 12},
        {"max_turns": 0},
        {"max_turns": (12, "SOUL.yaml")},
        id="request max_turns: 0 inherits the agent's value",
    ),
    pytest.param(
        WORKSPACE,
        {},
        {"max_turns": 0},
        {"max_turns": (40, "config.yaml")},
        id="request max_turns: 0 inherits the workspace value",
    ),
    pytest.param(
        WORKSPACE,
        {"max_turns": 12},
        {"max_turns": 99},
        {"max_turns": (99, "request")},
        id="request max_turns: an explicit value wins",
    ),
    pytest.param(
        CEILINGS,
        {},
        {"max_turns": -1, "reasoning_max_steps": -1},
        {"max_turns": (30, "ceiling"), "reasoning_max_steps": (30, "ceiling")},
        id="request: positive ceilings cap unlimited requests, reasoning included",
    ),
    pytest.param(
        WORKSPACE,
        {"budget": {"max_tokens": 10, "max_llm_calls": 2}},
        {"budget": {"max_tokens": 0}},
        {"max_tokens": (None, "request"), "max_llm_calls": (2, "SOUL.yaml")},
        id="request budget: zero requests unlimited; an omitted dimension inherits",
    ),
    pytest.param(
        CEILINGS,
        {},
        {"budget": {"max_tokens": 0, "max_llm_calls": 0}},
        {"max_tokens": (5000, "ceiling"), "max_llm_calls": (4, "ceiling")},
        id="request budget: subject to positive workspace ceilings",
    ),
    pytest.param(
        WORKSPACE,
        {"run_timeout": "1h"},
        {"run_timeout": "0"},
        {"run_timeout": (None, "request"), "http_timeout": (None, "accommodates run")},
        id='request run_timeout: "0" means no practical deadline',
    ),
    pytest.param(
        WORKSPACE,
        {},
        {"run_timeout": "72h"},
        {
            "run_timeout": (72 * HOURS, "request"),
            "http_timeout": (72 * HOURS + 60, "accommodates run"),
        },
        id="request run_timeout: the HTTP timeout accommodates the run",
    ),
    pytest.param(
        WORKSPACE,
        {"run_timeout": "1h"},
        {},
        {"run_timeout": (HOURS, "SOUL.yaml")},
        id="request run_timeout: absent inherits",
    ),
    pytest.param(
        WORKSPACE,
        {"no_progress_limit": 3},
        {"no_progress_limit": 0},
        {"no_progress_limit": (None, "request")},
        id="request no_progress_limit: 0 disables",
    ),
    pytest.param(
        WORKSPACE,
        {"reasoning": {"max_steps": 5}},
        {"reasoning_max_steps": -1},
        {"reasoning_max_steps": (None, "request")},
        id="request reasoning_max_steps: -1 is unlimited",
    ),
    pytest.param(
        {"costs": {"max_output_tokens_ceiling": 3000}},
        {},
        {"max_output_tokens": 5000},
        {"max_output_tokens": (3000, "ceiling")},
        id="request max_output_tokens: capped by the workspace ceiling",
    ),
    pytest.param(
        WORKSPACE,
        {"llm": {"max_tokens": 900}},
        {"max_output_tokens": 0},
        {"max_output_tokens": (900, "SOUL.yaml")},
        id="request max_output_tokens: 0 inherits",
    ),
]


@pytest.mark.parametrize(("config", "agent", "overrides", "expected"), REQUESTS)
def test_request_overrides_follow_the_same_semantics(
    resolve_policy: Resolve,
    config: dict[str, Any] | None,
    agent: dict[str, Any],
    overrides: dict[str, Any],
    expected: dict[str, tuple[float | None, str]],
) -> None:
    policy = resolve_policy(config, {"id": "a", **agent}, overrides)
    got = {name: (policy.limit(name).value, policy.limit(name).source) for name in expected}
    assert got == expected


@pytest.mark.parametrize(
    ("overrides", "path", "message"),
    [
        pytest.param(
            {"max_turns": -2}, "overrides.max_turns", "expected -1 or more", id="max_turns -2"
        ),
        pytest.param(
            {"max_turns": "lots"},
            "overrides.max_turns",
            "expected an integer",
            id="max_turns string",
        ),
        pytest.param(
            {"max_turns": True}, "overrides.max_turns", "expected an integer", id="max_turns bool"
        ),
        pytest.param(
            {"max_turns": 2.5}, "overrides.max_turns", "expected an integer", id="max_turns float"
        ),
        pytest.param(
            {"budget": {"max_tokens": -1}},
            "overrides.budget.max_tokens",
            "expected 0 or more",
            id="budget.max_tokens -1",
        ),
        pytest.param(
            {"budget": {"max_llm_calls": -5}},
            "overrides.budget.max_llm_calls",
            "expected 0 or more",
            id="budget.max_llm_calls -5",
        ),
        pytest.param(
            {"budget": {"tokens": 5}}, "overrides.budget.tokens", "unknown key", id="budget typo"
        ),
        pytest.param({"budget": 5}, "overrides.budget", "expected a mapping", id="budget scalar"),
        pytest.param(
            {"run_timeout": "soon"},
            "overrides.run_timeout",
            "expected a duration",
            id="run_timeout text",
        ),
        pytest.param(
            {"run_timeout": "-1h"},
            "overrides.run_timeout",
            "cannot be negative",
            id="run_timeout negative",
        ),
        pytest.param(
            {"run_timeout": 30},
            "overrides.run_timeout",
            "needs a unit",
            id="run_timeout bare number",
        ),
        pytest.param(
            {"no_progress_limit": -1},
            "overrides.no_progress_limit",
            "expected 0 or more",
            id="no_progress_limit -1",
        ),
        pytest.param(
            {"reasoning_max_steps": -2},
            "overrides.reasoning_max_steps",
            "expected -1 or more",
            id="reasoning_max_steps -2",
        ),
        pytest.param(
            {"max_output_tokens": -1},
            "overrides.max_output_tokens",
            "expected 0 or more",
            id="max_output_tokens -1",
        ),
        pytest.param(
            {"max_turn": 5}, "overrides.max_turn", "did you mean 'max_turns'", id="unknown key"
        ),
    ],
)
def test_bad_overrides_raise_config_error_naming_the_field(
    resolve_policy: Resolve, overrides: dict[str, Any], path: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_policy(WORKSPACE, None, overrides)
    assert [issue.path for issue in caught.value.issues] == [path]
    issue = caught.value.issues[0]
    assert message in issue.message
    assert issue.location.file == "request"
    assert f"request: {path}: " in str(caught.value)


def test_every_bad_override_is_reported_at_once(resolve_policy: Resolve) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_policy(None, None, {"max_turns": -3, "budget": {"max_tokens": -1}})
    assert sorted(issue.path for issue in caught.value.issues) == [
        "overrides.budget.max_tokens",
        "overrides.max_turns",
    ]


def test_an_unknown_agent_is_a_usage_error(kernel: Kernel) -> None:
    with pytest.raises(UsageError, match="no agent 'ghost'") as caught:
        kernel.resolve_policy("ghost")
    assert not isinstance(caught.value, ConfigError)
    assert caught.value.exit_code == 2


# -- a stricter company policy is just another plugin -----------------------------------------

COMPANY_MAX_TURNS = 10
COMPANY_MAX_TOKENS = 50_000


def _tighten(limit: Limit[Any], cap: int) -> Limit[Any]:
    if limit.value is not None and limit.value <= cap:
        return limit
    return Limit(cap, "company policy", None, f"company policy caps this at {cap}")


@hookimpl(wrapper=True)
def company_wrapper(kernel: Kernel, agent_id: str, overrides: Any) -> Generator[None, Any, Any]:
    policy = yield
    return attrs.evolve(
        policy,
        max_turns=_tighten(policy.max_turns, COMPANY_MAX_TURNS),
        reasoning_max_steps=_tighten(policy.reasoning_max_steps, COMPANY_MAX_TURNS),
        max_tokens=_tighten(policy.max_tokens, COMPANY_MAX_TOKENS),
    )


def test_a_wrapper_plugin_tightens_the_builtin_policy(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {"max_turns": 6, "run_timeout": "3h"})
    company = throwaway_plugin("company", soulacy_resolve_policy=company_wrapper)
    kernel = make_kernel(extra_plugins=[company])

    unlimited = kernel.resolve_policy("a", {"max_turns": -1, "budget": {"max_tokens": 0}})
    assert (unlimited.max_turns.value, unlimited.max_turns.source) == (10, "company policy")
    assert unlimited.reasoning_max_steps.value == 10
    assert (unlimited.max_tokens.value, unlimited.max_tokens.source) == (50_000, "company policy")

    within = kernel.resolve_policy("a")
    assert (within.max_turns.value, within.max_turns.source) == (6, "SOUL.yaml")
    # Everything the wrapper leaves alone is the builtin resolution, unchanged.
    builtin = make_kernel().resolve_policy("a")
    assert within.run_timeout == builtin.run_timeout
    assert within.max_llm_calls == builtin.max_llm_calls
    assert within.limit("http_timeout") == builtin.limit("http_timeout")
    assert within.max_turns == builtin.max_turns
    assert within.max_tokens != builtin.max_tokens  # unlimited by default, capped by the company


def test_a_tryfirst_plugin_replaces_the_builtin_policy(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {})
    seen: list[str] = []

    @hookimpl(tryfirst=True)
    def replacement(kernel: Kernel, agent_id: str, overrides: Any) -> ExecutionPolicy:
        seen.append(agent_id)
        fixed = Limit(3, "replacement")
        # The pure resolution of the workspace, without asking any hook for model capacity.
        base = resolve(agent_id, kernel.config, kernel.agent(agent_id).settings)
        return attrs.evolve(base, max_turns=fixed, reasoning_max_steps=fixed)

    company = throwaway_plugin("company", soulacy_resolve_policy=replacement)
    kernel = make_kernel(extra_plugins=[company])
    recorder = HookRecorder(kernel.pm)
    try:
        policy = kernel.resolve_policy("a", {"max_turns": -1})
    finally:
        recorder.finish()
    assert seen == ["a"]
    assert (policy.max_turns.value, policy.max_turns.source) == (3, "replacement")
    # firstresult: the replacement answered, so the builtin implementation never ran (it would
    # have asked soulacy_model_capacity).
    call = recorder.assert_called("soulacy_resolve_policy", agent_id="a")
    assert call.result is policy
    assert len(recorder.getcalls("soulacy_resolve_policy")) == 1
    assert recorder.getcalls("soulacy_model_capacity") == []


def test_a_replacement_that_declines_leaves_the_builtin_in_charge(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {"max_turns": 7})

    @hookimpl(tryfirst=True)
    def declining(kernel: Kernel, agent_id: str, overrides: Any) -> None:
        return None

    plugin = throwaway_plugin("declining", soulacy_resolve_policy=declining)
    policy = make_kernel(extra_plugins=[plugin]).resolve_policy("a")
    assert (policy.max_turns.value, policy.max_turns.source) == (7, "SOUL.yaml")


def test_the_wrapper_also_tightens_a_replacement(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {})

    @hookimpl(tryfirst=True)
    def generous(kernel: Kernel, agent_id: str, overrides: Any) -> ExecutionPolicy:
        base = resolve(agent_id, kernel.config, kernel.agent(agent_id).settings)
        return attrs.evolve(base, max_turns=Limit(None, "generous"))

    plugins = [
        throwaway_plugin("generous", soulacy_resolve_policy=generous),
        throwaway_plugin("company", soulacy_resolve_policy=company_wrapper),
    ]
    policy = make_kernel(extra_plugins=plugins).resolve_policy("a")
    assert (policy.max_turns.value, policy.max_turns.source) == (10, "company policy")


def test_without_the_policy_plugin_nothing_resolves(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", {})
    kernel = make_kernel(plugins=["no:policy"])
    with pytest.raises(PluginError, match="no loaded plugin resolves execution policy"):
        kernel.resolve_policy("a")
