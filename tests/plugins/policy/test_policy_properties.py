"""Properties of the execution policy over random workspaces, agents, requests and ceilings.

Settings are built through a real kernel (config.yaml and SOUL.yaml written to a fresh workspace
per example); the policy is resolved with the pure ``soulacy.plugins.policy.resolve``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from hypothesis import given, note, settings
from hypothesis import strategies as st

from soulacy.kernel import Duration, Kernel, Settings, structure
from soulacy.kernel.policy import PolicyLimit
from soulacy.plugins.policy import (
    AgentBudget,
    Limit,
    ModelCapacity,
    RequestOverrides,
    resolve,
)

Load = Callable[..., Kernel]
PROPERTY = settings(max_examples=150, deadline=None)

# -- strategies -------------------------------------------------------------------------------

# The special values (0 and -1) are drawn often, beside ordinary ones.
TOKENS = st.just(0) | st.integers(0, 10**7)
CALLS = st.just(0) | st.integers(0, 5000)
COUNTS = st.sampled_from([-1, 0]) | st.integers(-1, 1000)  # agent and request turns/steps
RUN_TIMEOUTS = st.sampled_from(["0", "90s", "30m", "2h", "48h", "48h1m", "100h"])


def optional(**members: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A mapping in which every member may be absent."""
    return st.fixed_dictionaries({}, optional=members)


def budgets(tokens: st.SearchStrategy[int], calls: st.SearchStrategy[int]) -> Any:
    return optional(max_tokens=tokens, max_llm_calls=calls)


WORKSPACES = optional(
    runtime=optional(
        default_max_turns=st.integers(0, 1000),
        max_turns_ceiling=st.integers(0, 500),
        default_budget=budgets(TOKENS, CALLS),
        max_budget=budgets(TOKENS, CALLS),
        no_progress_limit=st.integers(0, 60),
    ),
    costs=optional(
        default_max_output_tokens=st.integers(0, 200_000),
        max_output_tokens_ceiling=st.integers(0, 100_000),
    ),
)
AGENTS = optional(
    name=st.just("An agent"),
    max_turns=COUNTS,
    budget=st.none() | budgets(TOKENS, CALLS),
    reasoning=optional(max_steps=COUNTS, total_timeout=RUN_TIMEOUTS),
    llm=optional(max_tokens=st.integers(0, 200_000)),
    no_progress_limit=st.integers(0, 60),
    run_timeout=RUN_TIMEOUTS,
)
REQUEST_DICTS = optional(
    max_turns=COUNTS,
    budget=budgets(TOKENS, CALLS),
    run_timeout=RUN_TIMEOUTS,
    max_output_tokens=st.integers(0, 200_000),
    no_progress_limit=st.integers(0, 60),
    reasoning_max_steps=COUNTS,
)
CAPACITIES = st.none() | st.builds(
    ModelCapacity,
    context_window=st.none() | st.integers(1, 2_000_000),
    max_output_tokens=st.none() | st.integers(1, 200_000),
)


def overrides_of(raw: Mapping[str, Any]) -> RequestOverrides:
    """A request body structured the way the plugin structures it."""
    overrides: RequestOverrides = structure(
        dict(raw), RequestOverrides, origin="request", key="overrides"
    )
    return overrides


def build(
    load_kernel: Load, config: Mapping[str, Any], **agents: Mapping[str, Any]
) -> tuple[Settings, dict[str, Settings]]:
    note(f"config.yaml: {config!r}")
    for agent_id, doc in agents.items():
        note(f"agents/{agent_id}/SOUL.yaml: {doc!r}")
    kernel = load_kernel(config, agents)
    return kernel.config, {agent_id: kernel.agent(agent_id).settings for agent_id in agents}


def ceilings_of(config: Settings) -> dict[str, int]:
    """Each capped field of the policy and the positive workspace ceiling on it (0: none)."""
    turns = config.get("runtime.max_turns_ceiling")
    return {
        "max_turns": turns,
        "reasoning_max_steps": turns,
        "max_tokens": config.get("runtime.max_budget.max_tokens"),
        "max_llm_calls": config.get("runtime.max_budget.max_llm_calls"),
        "max_output_tokens": config.get("costs.max_output_tokens_ceiling"),
    }


# -- a positive ceiling is never exceeded -----------------------------------------------------


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, request=REQUEST_DICTS, capacity=CAPACITIES)
def test_a_positive_ceiling_is_never_exceeded(
    load_kernel: Load,
    config: dict[str, Any],
    agent: dict[str, Any],
    request: dict[str, Any],
    capacity: ModelCapacity | None,
) -> None:
    workspace, agents = build(load_kernel, config, a=agent)
    policy = resolve("a", workspace, agents["a"], overrides_of(request), capacity)
    for field, ceiling in ceilings_of(workspace).items():
        limit: Limit[int] = policy.limit(field)
        if ceiling > 0:
            assert limit.value is not None, field
            assert limit.value <= ceiling, field
    if capacity is not None and capacity.max_output_tokens:
        assert policy.max_output_tokens.value is not None
        assert policy.max_output_tokens.value <= capacity.max_output_tokens


UNLIMITED_TURNS = st.sampled_from([-1, 0]) | st.integers(1, 2000)
UNLIMITED_BUDGET = st.just(0) | st.integers(1, 10**7)


@PROPERTY
@given(
    turn_ceiling=st.integers(1, 500),
    budget_ceiling=st.builds(
        dict, max_tokens=st.integers(1, 10**6), max_llm_calls=st.integers(1, 500)
    ),
    output_ceiling=st.integers(1, 100_000),
    defaults=st.builds(
        dict,
        default_max_turns=st.just(0) | st.integers(1, 2000),
        default_budget=budgets(UNLIMITED_BUDGET, UNLIMITED_BUDGET),
    ),
    default_output=st.just(0) | st.integers(1, 200_000),
    agent=optional(
        max_turns=UNLIMITED_TURNS,
        budget=budgets(UNLIMITED_BUDGET, UNLIMITED_BUDGET),
        reasoning=optional(max_steps=UNLIMITED_TURNS),
        llm=optional(max_tokens=st.just(0) | st.integers(1, 200_000)),
    ),
    request=optional(
        max_turns=UNLIMITED_TURNS,
        reasoning_max_steps=UNLIMITED_TURNS,
        budget=budgets(UNLIMITED_BUDGET, UNLIMITED_BUDGET),
        max_output_tokens=st.just(0) | st.integers(1, 200_000),
    ),
)
def test_unlimited_is_never_produced_under_a_positive_ceiling(
    load_kernel: Load,
    turn_ceiling: int,
    budget_ceiling: dict[str, int],
    output_ceiling: int,
    defaults: dict[str, Any],
    default_output: int,
    agent: dict[str, Any],
    request: dict[str, Any],
) -> None:
    config = {
        "runtime": {**defaults, "max_turns_ceiling": turn_ceiling, "max_budget": budget_ceiling},
        "costs": {
            "default_max_output_tokens": default_output,
            "max_output_tokens_ceiling": output_ceiling,
        },
    }
    workspace, agents = build(load_kernel, config, a=agent)
    policy = resolve("a", workspace, agents["a"], overrides_of(request))
    for field in ("max_turns", "reasoning_max_steps", "max_tokens", "max_llm_calls"):
        assert not policy.limit(field).unlimited, field
    assert not policy.max_output_tokens.unlimited
    # Whatever is capped says which ceiling capped it.
    for field, ceiling in ceilings_of(workspace).items():
        limit = policy.limit(field)
        if limit.source == "ceiling":
            assert limit.value == ceiling
            assert limit.reason is not None
            assert f"= {ceiling} caps every agent" in limit.reason


INHERIT = object()  # an explicit value that means "inherit" (0 for turns, steps and output)


def _count(value: int | None, *, zero_inherits: bool, minus_one_unlimited: bool) -> Any:
    """What an explicit agent or request value asks for: a number, None (unlimited) or INHERIT."""
    if value is None:
        return INHERIT
    if value == 0:
        return INHERIT if zero_inherits else None
    if value == -1 and minus_one_unlimited:
        return None
    return value


def _seconds(value: Any) -> Any:
    if value is None:
        return INHERIT
    return Duration.parse(value).seconds or None


def _asked(
    field: str, agent: Mapping[str, Any], request: Mapping[str, Any]
) -> tuple[Any, str] | None:
    """The explicit value the first stating level asks for, and that level; None: inherited."""
    counts = {"zero_inherits": True, "minus_one_unlimited": True}
    budget = {"zero_inherits": False, "minus_one_unlimited": False}
    sources: dict[str, list[tuple[Any, str]]] = {
        "max_turns": [
            (_count(request.get("max_turns"), **counts), "request"),
            (_count(agent.get("max_turns"), **counts), "SOUL.yaml"),
        ],
        "reasoning_max_steps": [
            (_count(request.get("reasoning_max_steps"), **counts), "request"),
            (_count((agent.get("reasoning") or {}).get("max_steps"), **counts), "SOUL.yaml"),
        ],
        "max_output_tokens": [
            (_count(request.get("max_output_tokens"), **counts), "request"),
            (_count((agent.get("llm") or {}).get("max_tokens"), **counts), "SOUL.yaml"),
        ],
        "no_progress_limit": [
            (_count(request.get("no_progress_limit"), **budget), "request"),
            (_count(agent.get("no_progress_limit"), **budget), "SOUL.yaml"),
        ],
        "run_timeout": [
            (_seconds(request.get("run_timeout")), "request"),
            (_seconds(agent.get("run_timeout")), "SOUL.yaml"),
        ],
    }
    for dim in ("max_tokens", "max_llm_calls"):
        sources[dim] = [
            (_count((request.get("budget") or {}).get(dim), **budget), "request"),
            (_count((agent.get("budget") or {}).get(dim), **budget), "SOUL.yaml"),
        ]
    for value, level in sources[field]:
        if value is not INHERIT:
            return value, level
    return None


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, request=REQUEST_DICTS)
def test_explicit_values_are_authoritative_within_the_ceilings(
    load_kernel: Load, config: dict[str, Any], agent: dict[str, Any], request: dict[str, Any]
) -> None:
    """Request, then SOUL.yaml: the first level that states a value wins (0 inherits turns,
    steps and output, -1 is unlimited; a zero budget is unlimited, a zero no_progress_limit
    disables, a "0" run timeout has no deadline), and only a positive ceiling lowers it."""
    workspace, agents = build(load_kernel, config, a=agent)
    policy = resolve("a", workspace, agents["a"], overrides_of(request))
    ceilings = ceilings_of(workspace)
    for field in (*ceilings, "no_progress_limit", "run_timeout"):
        asked = _asked(field, agent, request)
        if asked is None:
            continue
        value, level = asked
        ceiling = ceilings.get(field, 0)
        limit = policy.limit(field)
        if ceiling and (value is None or value > ceiling):
            assert (limit.value, limit.source) == (ceiling, "ceiling"), field
        else:
            assert (limit.value, limit.source) == (value, level), field


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, request=REQUEST_DICTS)
def test_the_http_timeout_always_carries_the_run(
    load_kernel: Load,
    declared: tuple[PolicyLimit, ...],
    config: dict[str, Any],
    agent: dict[str, Any],
    request: dict[str, Any],
) -> None:
    workspace, agents = build(load_kernel, config, a=agent)
    policy = resolve("a", workspace, agents["a"], overrides_of(request), declared=declared)
    run, http = policy.run_timeout.value, policy.limit("http_timeout").value
    if run is None:
        assert http is None
    else:
        assert http is None or http > run


# -- omitted always equals inherited ----------------------------------------------------------

# Which agent keys each field of the policy reads (every other field is the workspace's).
AGENT_KEYS = {
    "max_turns": ("max_turns",),
    "reasoning_max_steps": ("reasoning", "max_turns"),
    "max_tokens": ("budget",),
    "max_llm_calls": ("budget",),
    "max_output_tokens": ("llm",),
    "no_progress_limit": ("no_progress_limit",),
    "run_timeout": ("run_timeout",),
    "http_timeout": ("run_timeout",),
    "reasoning_total_timeout": ("reasoning", "run_timeout"),
    "reasoning_step_timeout": ("reasoning",),
}


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, capacity=CAPACITIES)
def test_an_omitted_agent_key_equals_the_workspace_value(
    load_kernel: Load, config: dict[str, Any], agent: dict[str, Any], capacity: ModelCapacity | None
) -> None:
    workspace, agents = build(load_kernel, config, a=agent, bare={})
    inherited = resolve("a", workspace, None, None, capacity)
    assert resolve("bare", workspace, agents["bare"], None, capacity) == attrs.evolve(
        inherited, agent_id="bare"
    )
    policy = resolve("a", workspace, agents["a"], None, capacity)
    for field, limit in policy.limits().items():
        if not any(key in agent for key in AGENT_KEYS.get(field, ())):
            assert limit == inherited.limit(field), field


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS)
def test_zero_and_empty_spellings_inherit_like_omission(
    load_kernel: Load, config: dict[str, Any], agent: dict[str, Any]
) -> None:
    """Agent max_turns: 0 or omitted inherits; llm.max_tokens 0 inherits the output allowance;
    an empty or null budget inherits the workspace default; reasoning.max_steps 0 inherits."""
    omitted = {
        k: v for k, v in agent.items() if k not in ("max_turns", "budget", "llm", "reasoning")
    }
    spelled = {
        **omitted,
        "max_turns": 0,
        "budget": {} if agent.get("budget") else None,  # an empty or a null budget
        "llm": {"max_tokens": 0},
        "reasoning": {"max_steps": 0},
    }
    workspace, agents = build(load_kernel, config, omitted=omitted, spelled=spelled)
    a = resolve("x", workspace, agents["omitted"]).limits()
    b = resolve("x", workspace, agents["spelled"]).limits()
    # Equal but for the line an agent-file value sits on (the two files differ in length).
    assert {k: attrs.evolve(v, location=None) for k, v in a.items() if v.source == "SOUL.yaml"} == {
        k: attrs.evolve(v, location=None) for k, v in b.items() if v.source == "SOUL.yaml"
    }
    assert {k: v for k, v in a.items() if v.source != "SOUL.yaml"} == {
        k: v for k, v in b.items() if v.source != "SOUL.yaml"
    }


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, request=REQUEST_DICTS)
def test_an_omitted_request_field_equals_the_agents_value(
    load_kernel: Load, config: dict[str, Any], agent: dict[str, Any], request: dict[str, Any]
) -> None:
    workspace, agents = build(load_kernel, config, a=agent)
    without = resolve("a", workspace, agents["a"], None)
    assert resolve("a", workspace, agents["a"], RequestOverrides()) == without
    # 0 inherits for turns, reasoning steps and output tokens (not for budgets, where 0 asks
    # for unlimited, nor no_progress_limit, where 0 disables).
    zeros = RequestOverrides(max_turns=0, reasoning_max_steps=0, max_output_tokens=0)
    assert resolve("a", workspace, agents["a"], zeros) == without
    # A field the request leaves out is the agent's (or workspace's) resolution of it.
    overrides = overrides_of(request)
    policy = resolve("a", workspace, agents["a"], overrides)
    request_fields = {
        "max_turns": ("max_turns",),
        "reasoning_max_steps": ("reasoning_max_steps", "max_turns"),
        "max_tokens": ("budget.max_tokens",),
        "max_llm_calls": ("budget.max_llm_calls",),
        "max_output_tokens": ("max_output_tokens",),
        "no_progress_limit": ("no_progress_limit",),
        "run_timeout": ("run_timeout",),
        "http_timeout": ("run_timeout",),
        "reasoning_total_timeout": ("run_timeout",),
    }
    given_fields = {
        *(k for k in request if k != "budget"),
        *(f"budget.{k}" for k in request.get("budget", {})),
    }
    for field, limit in policy.limits().items():
        if not given_fields.intersection(request_fields.get(field, ())):
            assert limit == without.limit(field), field


@PROPERTY
@given(config=WORKSPACES, agent=AGENTS, request=REQUEST_DICTS, capacity=CAPACITIES)
def test_the_kernel_hook_resolves_like_the_pure_function(
    load_kernel: Load,
    declared: tuple[PolicyLimit, ...],
    capacity_plugin: Callable[..., Any],
    config: dict[str, Any],
    agent: dict[str, Any],
    request: dict[str, Any],
    capacity: ModelCapacity | None,
) -> None:
    kernel = load_kernel(config, {"a": agent}, plugins=[capacity_plugin(capacity)])
    settings = kernel.agent("a").settings
    expected = resolve("a", kernel.config, settings, overrides_of(request), capacity, declared)
    assert kernel.resolve_policy("a", request) == expected


# -- explicit values survive load -> save -> load ---------------------------------------------

MINUTES = st.integers(1, 5000)


@st.composite
def ordered_timeouts(draw: st.DrawFn) -> dict[str, str]:
    """tool <= llm <= step <= run < http, the longest ones possibly "0" (no deadline)."""
    minutes = sorted(draw(st.lists(MINUTES, min_size=4, max_size=4)))
    minutes.append(minutes[-1] + draw(st.integers(1, 100)))  # http outlasts the run
    unlimited = draw(st.integers(0, 5))
    texts = [f"{m}m" for m in minutes[: 5 - unlimited]] + ["0"] * unlimited
    return dict(zip(("tool", "llm", "step", "run", "http"), texts, strict=True))


MODEL_NAMES = st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True)
COSTS = st.integers(0, 10_000).map(lambda cents: cents / 100)
SAVED_CONFIGS = optional(
    plugins=st.just({"disable": []}),
    llm=optional(
        default=optional(provider=MODEL_NAMES, model=MODEL_NAMES),
        studio=optional(
            max_build_tokens=TOKENS,
            max_build_cost_usd=COSTS,
            max_build_attempts=st.integers(-1, 100),
            max_build_elapsed=st.sampled_from(["0", "30m", "48h"]),
        ),
    ),
    runtime=optional(
        default_max_turns=st.integers(0, 1000),
        max_turns_ceiling=st.integers(0, 500),
        default_budget=budgets(TOKENS, CALLS),
        max_budget=budgets(TOKENS, CALLS),
        no_progress_limit=st.integers(0, 60),
        timeouts=ordered_timeouts(),
    ),
    costs=optional(
        default_max_output_tokens=st.integers(0, 200_000),
        max_output_tokens_ceiling=st.integers(0, 100_000),
    ),
)
CHANGES = {
    "runtime.default_max_turns": st.integers(0, 1000),
    "runtime.max_turns_ceiling": st.integers(0, 500),
    "runtime.default_budget.max_tokens": TOKENS,
    "runtime.default_budget.max_llm_calls": CALLS,
    "runtime.max_budget.max_tokens": TOKENS,
    "runtime.max_budget.max_llm_calls": CALLS,
    "runtime.no_progress_limit": st.integers(0, 60),
    "costs.default_max_output_tokens": st.integers(0, 200_000),
    "costs.max_output_tokens_ceiling": st.integers(0, 100_000),
    "llm.studio.max_build_tokens": TOKENS,
    "llm.studio.max_build_cost_usd": COSTS,
    "llm.studio.max_build_attempts": st.integers(-1, 100),
    "llm.default.model": MODEL_NAMES,
}
ALL_KEYS = [
    *CHANGES,
    "plugins.disable",
    "llm.default.provider",
    "llm.studio.max_build_elapsed",
    *(f"runtime.timeouts.{name}" for name in ("tool", "llm", "step", "run", "http")),
]


def block_yaml(doc: Mapping[str, Any], depth: int = 0) -> str:
    """Block-style YAML as a person writes it: comments on every line, strings quoted."""
    lines = []
    for number, (key, value) in enumerate(doc.items()):
        pad = "  " * depth
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:   # the {key} section")
            lines.append(block_yaml(value, depth + 1).rstrip("\n"))
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{key}: {{}}")
        elif isinstance(value, str):
            quote = "'" if number % 2 else '"'
            lines.append(f"{pad}{key}: {quote}{value}{quote}  # saved")
        elif isinstance(value, list):
            lines.append(f"{pad}{key}: []")
        else:
            lines.append(f"{pad}{key}: {value!r}  # saved")
    return "\n".join(lines) + "\n" if lines else ""


def nested(dotted: str, value: Any) -> dict[str, Any]:
    *parents, last = dotted.split(".")
    out: dict[str, Any] = {last: value}
    for part in reversed(parents):
        out = {part: out}
    return out


@PROPERTY
@given(
    config=SAVED_CONFIGS,
    change=st.sampled_from(sorted(CHANGES)).flatmap(
        lambda key: st.tuples(st.just(key), CHANGES[key], st.booleans())
    ),
)
def test_explicit_values_survive_load_save_load(
    load_kernel: Load, config: dict[str, Any], change: tuple[str, Any, bool]
) -> None:
    key, value, dotted = change
    text = block_yaml(config)
    note(text)
    kernel = load_kernel(text)
    before = {k: (kernel.config.is_set(k), kernel.config.get(k)) for k in ALL_KEYS}
    saved_policy = resolve("a", kernel.config)

    changed = kernel.update_config({key: value} if dotted else nested(key, value))

    was_set, old = before[key]
    assert changed == ([key] if not was_set or old != value else [])
    after_text = kernel.config_file.read_text(encoding="utf-8")
    diff = list(difflib.ndiff(text.splitlines(), after_text.splitlines()))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    # Only the changed line differs (or, for a new key, the empty mapping it goes into).
    assert len(removed) == (1 if changed and was_set else len(removed))
    assert len(removed) <= 1
    assert all(any(part in line for part in key.split(".")) for line in removed)
    reloaded = Kernel.load(kernel.workspace, autoload=False, environ={}).config
    for k, (is_set, saved) in before.items():
        if k == key:
            continue
        assert reloaded.is_set(k) is is_set, k  # absent stays absent, explicit stays explicit
        assert reloaded.get(k) == saved, k
    assert reloaded.is_set(key)
    assert reloaded.get(key) == value
    if not changed:
        assert after_text == text
        assert resolve("a", reloaded) == saved_policy


@PROPERTY
@given(config=SAVED_CONFIGS)
def test_saving_the_same_values_changes_nothing(load_kernel: Load, config: dict[str, Any]) -> None:
    text = block_yaml(config)
    kernel = load_kernel(text)
    saved = dict(leaves(config))
    assert {k for k in ALL_KEYS if kernel.config.is_set(k)} == set(saved)
    assert kernel.update_config(saved) == []
    assert kernel.update_config(config) == []
    assert kernel.config_file.read_text(encoding="utf-8") == text


def leaves(doc: Mapping[str, Any], prefix: str = "") -> Any:
    for key, value in doc.items():
        if isinstance(value, Mapping):
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


@PROPERTY
@given(config=WORKSPACES, budget=budgets(TOKENS, CALLS))
def test_agent_budget_dimensions_inherit_one_by_one(
    load_kernel: Load, config: dict[str, Any], budget: dict[str, int]
) -> None:
    workspace, agents = build(load_kernel, config, a={"budget": budget})
    policy = resolve("a", workspace, agents["a"])
    inherited = resolve("a", workspace)
    for dim in ("max_tokens", "max_llm_calls"):
        limit = policy.limit(dim)
        if dim not in budget:
            assert limit == inherited.limit(dim)
        else:
            ceiling = workspace.get(f"runtime.max_budget.{dim}")
            asked = budget[dim] or None
            if ceiling and (asked is None or asked > ceiling):
                assert (limit.value, limit.source) == (ceiling, "ceiling")
            else:
                assert (limit.value, limit.source) == (asked, "SOUL.yaml")
            assert AgentBudget(**budget) == agents["a"].get("budget")
