"""Resolution of the execution policy: request -> SOUL.yaml -> config.yaml -> default, then
ceilings and model capacity; then the limits plugins declared (``PolicyLimit``), read the same
way and adjusted by their plugin's rule. Pure functions of the loaded settings and the
declarations, so they are easy to test.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import attrs

from soulacy.kernel import Settings
from soulacy.kernel.policy import (
    AGENT,
    CEILING,
    CONFIG,
    DEFAULT,
    ENVIRONMENT,
    MODEL,
    REQUEST,
    ExecutionPolicy,
    Limit,
    ModelCapacity,
    PolicyLimit,
)

from ._model import AgentBudget, RequestOverrides

N = TypeVar("N", int, float)
INHERITED = "inherited"


def workspace_limit(config: Settings, path: str, *, unlimited_at: Any = 0) -> Limit[Any]:
    """A workspace value with its source; ``unlimited_at`` is the value that means unlimited."""
    value = config.get(path)
    raw = value.seconds if hasattr(value, "seconds") else value  # Seconds: prints exactly
    loc = config.source_of(path)
    if loc is None:
        source = DEFAULT
    else:
        source = ENVIRONMENT if loc.file.startswith("environment") else CONFIG
    return Limit(None if raw == unlimited_at else raw, source, str(loc) if loc else None)


def declared_limit(config: Settings, declared: PolicyLimit) -> Limit[Any]:
    """The workspace value of a limit a plugin declared, with its source, read like the core
    limits: ``unlimited_at`` is unlimited, ``selects_default`` is the declared default (and the
    limit says so). The declared default when no loaded plugin owns the key."""
    try:
        limit = workspace_limit(config, declared.path, unlimited_at=declared.unlimited_at)
    except (KeyError, AttributeError):  # nobody owns the key: its owner is not loaded
        reason = f"no loaded plugin owns {declared.path}: the declared default"
        return Limit(declared.default, DEFAULT, None, reason)
    selects = declared.selects_default
    if selects is not None and limit.value is not None and limit.value == selects:
        return attrs.evolve(limit, value=declared.default, reason=f"{selects} selects the default")
    return limit


def _requested(value: Any, source: str, location: str | None) -> Limit[Any] | None:
    """An agent's or request's value: None or 0 inherits, -1 (or a zero duration) is unlimited."""
    if value is None:
        return None
    seconds = getattr(value, "seconds", None)
    if seconds is not None:  # durations: "0" is an explicit "no deadline", not "inherit"
        return Limit(None if seconds == 0 else seconds, source, location)
    if value == 0:
        return None
    return Limit(None if value == -1 else value, source, location)


def _disabling(value: Any, source: str, location: str | None) -> Limit[Any] | None:
    """A value for which 0 is an explicit choice (it disables the check): only None inherits."""
    if value is None:
        return None
    return Limit(None if value == 0 else value, source, location)


def _first(*candidates: Limit[Any] | None) -> Limit[Any]:
    for candidate in candidates:
        if candidate is not None:
            return candidate
    raise AssertionError("the workspace value always resolves")


def _cap(limit: Limit[N], ceiling: Limit[N], key: str) -> Limit[N]:
    """A positive ceiling caps every value, an unlimited request included."""
    if ceiling.value is None or ceiling.value <= 0:
        return limit
    if limit.value is None or limit.value > ceiling.value:
        asked = "unlimited" if limit.value is None else limit.value
        return Limit(
            ceiling.value,
            CEILING,
            ceiling.location,
            f"{key} = {ceiling.value} caps every agent (asked: {asked}, {limit.source})",
        )
    return limit


class _Agent:
    """Reads the policy keys of one SOUL.yaml (absent when the run has no agent file)."""

    def __init__(self, settings: Settings | None) -> None:
        self.settings = settings

    def get(self, path: str) -> tuple[Any, str | None]:
        if self.settings is None or not self.settings.is_set(path):
            return None, None
        loc = self.settings.source_of(path)
        if loc is None:  # a mapping key such as "budget" set as a whole
            loc = next(
                (v for k, v in self.settings.sources.locations.items() if k.startswith(path + ".")),
                None,
            )
        return self.settings.get(path), str(loc) if loc else None

    def limit(self, path: str) -> Limit[Any] | None:
        value, loc = self.get(path)
        return _requested(value, AGENT, loc)


def _budget_dimension(
    dim: str, config: Settings, agent: _Agent, request: RequestOverrides
) -> Limit[int]:
    req_budget: AgentBudget | None = request.budget
    req_value = getattr(req_budget, dim) if req_budget is not None else None
    agent_value, agent_loc = agent.get(f"budget.{dim}")
    chosen = _first(
        # An explicit budget with zero values requests unlimited for that dimension.
        Limit(req_value or None, REQUEST) if req_value is not None else None,
        Limit(agent_value or None, AGENT, agent_loc) if agent_value is not None else None,
        workspace_limit(config, f"runtime.default_budget.{dim}"),
    )
    return _cap(
        chosen, workspace_limit(config, f"runtime.max_budget.{dim}"), f"runtime.max_budget.{dim}"
    )


def resolve(
    agent_id: str,
    config: Settings,
    agent_settings: Settings | None = None,
    request: RequestOverrides | None = None,
    capacity: ModelCapacity | None = None,
    declared: Iterable[PolicyLimit] = (),
) -> ExecutionPolicy:
    """Resolve the execution policy of one run of ``agent_id``: its core limits, then the
    ``declared`` limits of plugins (``soulacy.kernel.policy.declared_limits``), each adjusted
    by its plugin's rule against the core limits."""
    request = request or RequestOverrides()
    capacity = capacity or ModelCapacity()
    agent = _Agent(agent_settings)
    turn_ceiling = workspace_limit(config, "runtime.max_turns_ceiling")

    turns_asked = _first(
        _requested(request.max_turns, REQUEST, None),
        agent.limit("max_turns"),
        workspace_limit(config, "runtime.default_max_turns"),
    )
    steps_asked = _first(
        _requested(request.reasoning_max_steps, REQUEST, None),
        agent.limit("reasoning.max_steps"),
        Limit(
            turns_asked.value,
            turns_asked.source,
            turns_asked.location,
            "reasoning steps inherit the turn allowance",
        ),
    )

    output = _first(
        _requested(request.max_output_tokens, REQUEST, None),
        agent.limit("llm.max_tokens"),
        workspace_limit(config, "costs.default_max_output_tokens"),
    )
    output = _cap(
        output,
        workspace_limit(config, "costs.max_output_tokens_ceiling"),
        "costs.max_output_tokens_ceiling",
    )
    if capacity.max_output_tokens and (
        output.value is None or output.value > capacity.max_output_tokens
    ):
        output = Limit(
            capacity.max_output_tokens,
            MODEL,
            None,
            f"the model produces at most {capacity.max_output_tokens} tokens per"
            f" response (asked: {output.value or 'unlimited'}, {output.source})",
        )
    context = (
        Limit(capacity.context_window, MODEL)
        if capacity.context_window
        else Limit(None, "unknown", None, "the provider reports no context window")
    )

    run = _first(
        _requested(request.run_timeout, REQUEST, None),
        agent.limit("run_timeout"),
        workspace_limit(config, "runtime.timeouts.run"),
    )
    step = workspace_limit(config, "runtime.timeouts.step")
    # no_progress_limit: 0 disables stall detection; it does not inherit.
    agent_progress, agent_progress_loc = agent.get("no_progress_limit")
    progress = _first(
        _disabling(request.no_progress_limit, REQUEST, None),
        _disabling(agent_progress, AGENT, agent_progress_loc),
        workspace_limit(config, "runtime.no_progress_limit"),
    )
    if progress.value is None:
        progress = Limit(None, progress.source, progress.location, "0 disables stall detection")

    core = ExecutionPolicy(
        agent_id=agent_id,
        max_turns=_cap(turns_asked, turn_ceiling, "runtime.max_turns_ceiling"),
        max_tokens=_budget_dimension("max_tokens", config, agent, request),
        max_llm_calls=_budget_dimension("max_llm_calls", config, agent, request),
        max_output_tokens=output,
        reasoning_max_steps=_cap(steps_asked, turn_ceiling, "runtime.max_turns_ceiling"),
        no_progress_limit=progress,
        run_timeout=run,
        llm_timeout=workspace_limit(config, "runtime.timeouts.llm"),
        step_timeout=step,
        tool_timeout=workspace_limit(config, "runtime.timeouts.tool"),
        reasoning_step_timeout=_first(agent.limit("reasoning.step_timeout"), step),
        reasoning_total_timeout=_first(agent.limit("reasoning.total_timeout"), run),
        context_window=context,
    )
    limits = tuple(declared)
    if not limits:
        return core
    extra: dict[str, Limit[Any]] = {}
    for limit in limits:
        value = declared_limit(config, limit)
        extra[limit.name] = limit.adjust(value, core) if limit.adjust is not None else value
    durations = frozenset(limit.name for limit in limits if limit.duration)
    return attrs.evolve(core, extra=extra, extra_durations=durations)
