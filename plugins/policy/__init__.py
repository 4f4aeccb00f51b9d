"""The builtin execution-policy plugin: generous defaults, explicit unlimited, ceilings.

It owns ``runtime`` and ``costs`` in config.yaml and the policy keys of SOUL.yaml
(``max_turns``, ``budget``, ``run_timeout``, ``reasoning``, ``no_progress_limit``), and answers
``soulacy_resolve_policy``. The limits other plugins declare (``soulacy_policy_limits``: studio's
build allowances, the HTTP deadline) it resolves, checks and reports like its own. A stricter
deployment policy wraps that hook in a plugin of its own.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import CliCommand, hookimpl, lazy_exports

from . import hookspecs

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Hashable

    import pluggy

    from soulacy.kernel import (
        AgentSpec,
        CliContext,
        ConfigIssue,
        ConfigSection,
        Kernel,
        Settings,
        StashKey,
    )
    from soulacy.kernel.policy import ExecutionPolicy, Limit, ModelCapacity, PolicyLimit

    from ._cache import PolicyCache
    from ._model import (
        AgentBudget,
        Budget,
        CostsConfig,
        Price,
        Reasoning,
        RequestOverrides,
        RuntimeConfig,
        Timeouts,
    )
    from ._resolve import declared_limit, resolve

# Imported on first use (PEP 562): declaring the plugin's hooks and command imports neither the
# models nor the configuration machinery (decision 0036).
_LAZY = {
    "AgentBudget": "._model",
    "Budget": "._model",
    "CostsConfig": "._model",
    "Price": "._model",
    "Reasoning": "._model",
    "RequestOverrides": "._model",
    "RuntimeConfig": "._model",
    "Timeouts": "._model",
    "declared_limit": "._resolve",
    "resolve": "._resolve",
    "ExecutionPolicy": "soulacy.kernel.policy",
    "Limit": "soulacy.kernel.policy",
    "ModelCapacity": "soulacy.kernel.policy",
}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "AgentBudget",
    "Budget",
    "CostsConfig",
    "ExecutionPolicy",
    "Limit",
    "ModelCapacity",
    "Price",
    "Reasoning",
    "RequestOverrides",
    "RuntimeConfig",
    "Timeouts",
    "declared_limit",
    "resolve",
]


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # the limit reader, for other plugins (studio)


@hookimpl
def soulacy_workspace_limit(config: Settings, declared: PolicyLimit) -> Limit[Any] | None:
    """The policy's own reading of a declared limit's workspace value, for plugins that need
    one outside a run (studio, for a build of an agent whose file does not load)."""
    from ._resolve import declared_limit

    return declared_limit(config, declared)


@hookimpl
def soulacy_policy_limits() -> Sequence[PolicyLimit]:
    from soulacy.kernel.policy import PolicyLimit

    return [
        PolicyLimit(
            "max_tool_result_chars",
            "runtime.max_tool_result_chars",
            100_000,
            "characters of one tool result kept and sent to the model (an excerpt beyond)",
            unlimited_at=0,
            minimum=0,
            meaning="0 (no cap) or a number of characters",
        )
    ]


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection, Duration

    from ._model import AgentBudget, CostsConfig, Reasoning, RuntimeConfig

    return [
        ConfigSection("runtime", RuntimeConfig, doc="turns, budgets and timeouts"),
        ConfigSection("costs", CostsConfig, doc="per-response output allowances"),
        ConfigSection("max_turns", int | None, scope="agent"),
        ConfigSection("budget", AgentBudget | None, scope="agent"),
        ConfigSection("run_timeout", Duration | None, scope="agent"),
        ConfigSection("reasoning", Reasoning, scope="agent"),
        ConfigSection("no_progress_limit", int | None, scope="agent"),
    ]


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    """The policy's ranges and timeout order, then the declared limits' ranges and rules."""
    from soulacy.kernel.policy import declared_limits

    from ._validate import WORKSPACE_RANGES, check_ranges, check_timeout_order, declared_ranges

    declared = list(declared_limits(kernel).values())
    return [
        *check_ranges(config, WORKSPACE_RANGES),
        *check_ranges(config, declared_ranges(declared)),
        *check_timeout_order(config),
        *(issue for limit in declared if limit.check for issue in limit.check(config)),
    ]


@hookimpl
def soulacy_validate_agent(agent: AgentSpec) -> Sequence[ConfigIssue]:
    from ._validate import AGENT_RANGES, check_ranges

    return list(check_ranges(agent.settings, AGENT_RANGES))


def _overrides(raw: Mapping[str, Any] | RequestOverrides | None) -> RequestOverrides:
    from soulacy.kernel import ConfigError, structure

    from ._model import RequestOverrides

    if isinstance(raw, RequestOverrides):
        return raw
    if not raw:  # most runs: nothing to structure or check
        return _no_overrides()
    overrides: RequestOverrides = structure(
        dict(raw or {}), RequestOverrides, origin="request", key="overrides"
    )
    issues = list(check_ranges_of(overrides))
    if issues:
        raise ConfigError(issues)
    return overrides


@functools.cache
def _no_overrides() -> RequestOverrides:
    from ._model import RequestOverrides

    return RequestOverrides()  # frozen: one for every run that asks for nothing


def check_ranges_of(overrides: RequestOverrides) -> list[ConfigIssue]:
    """The same ranges as the agent keys of the same meaning."""
    from soulacy.kernel import ConfigIssue, Location

    from ._model import AgentBudget

    budget = overrides.budget or AgentBudget()
    checks = {
        "max_turns": (overrides.max_turns, -1),
        "no_progress_limit": (overrides.no_progress_limit, 0),
        "reasoning_max_steps": (overrides.reasoning_max_steps, -1),
        "max_output_tokens": (overrides.max_output_tokens, 0),
        "budget.max_tokens": (budget.max_tokens, 0),
        "budget.max_llm_calls": (budget.max_llm_calls, 0),
    }
    return [
        ConfigIssue(
            Location("request"), f"overrides.{name}", f"expected {low} or more", value, True
        )
        for name, (value, low) in checks.items()
        if value is not None and value < low
    ]


@hookimpl
def soulacy_resolve_policy(kernel: Kernel, agent_id: str, overrides: Any) -> ExecutionPolicy:
    """Resolved once per agent, overrides, configuration and model capacity (decision 0041):
    a config change or a reloaded agent resolves again."""
    cache_key, new_cache, overrides_key, resolve = _resolution()
    agent = kernel.agent(agent_id)
    config = kernel.config
    llm = agent.section("llm")
    # Asked every run: a provider may learn its model's capacity while it runs.
    capacity = kernel.hook.soulacy_model_capacity(
        kernel=kernel, provider=llm.provider, model=llm.model
    )
    cache = kernel.stash.get(cache_key, None)
    if cache is None:
        cache = kernel.stash[cache_key] = new_cache()
    declared = cache.declared(kernel)
    raw_key = overrides_key(overrides)
    key = (agent_id, raw_key)
    if raw_key is not None:
        cached = cache.get(key, config, agent, capacity, declared)
        if cached is not None:
            return cached
    policy = resolve(agent_id, config, agent.settings, _overrides(overrides), capacity, declared)
    if raw_key is not None:
        cache.put(key, config, agent, capacity, declared, policy)
    return policy


@functools.cache
def _resolution() -> tuple[
    StashKey[PolicyCache],
    type[PolicyCache],
    Callable[[Any], Hashable | None],
    Callable[..., ExecutionPolicy],
]:
    """What a resolution uses, imported on its first use (decision 0036) and then kept: an
    import statement costs microseconds on every run even once the module is loaded."""
    from ._cache import POLICY_CACHE, PolicyCache, overrides_key
    from ._resolve import resolve

    return POLICY_CACHE, PolicyCache, overrides_key, resolve


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "policy show",
            "the resolved execution policy of an agent, with sources",
            "soulacy.plugins.policy:_policy_show",
            _configure_show,
        )
    ]


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", help="agent id")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _policy_show(args: argparse.Namespace, ctx: CliContext) -> int:
    policy: ExecutionPolicy = ctx.kernel().resolve_policy(args.agent)
    if args.json:
        ctx.print_json(policy.to_dict())
        return 0
    ctx.print(f"execution policy of agent {policy.agent_id!r}")
    rows = [(name, _shown(policy, name, limit), limit) for name, limit in policy.limits().items()]
    width = max(len(name) for name, _, _ in rows)
    value_width = max(len(shown) for _, shown, _ in rows)
    for name, shown, limit in rows:
        where = f" ({limit.location})" if limit.location else ""
        line = f"  {name:<{width}}  {shown:<{value_width}}  {limit.source}{where}"
        if limit.reason:
            line += f"; {limit.reason}"
        ctx.print(line)
    return 0


def _shown(policy: ExecutionPolicy, name: str, limit: Limit[Any]) -> str:
    from soulacy.kernel import format_duration

    if limit.value is None:
        return "unlimited"
    if policy.is_duration(name):
        return format_duration(limit.value)
    return str(limit.value)
