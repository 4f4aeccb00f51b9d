"""The builtin execution-policy plugin: generous defaults, explicit unlimited, ceilings.

It owns ``runtime``, ``costs`` and ``llm.studio`` in config.yaml and the policy keys of SOUL.yaml
(``max_turns``, ``budget``, ``run_timeout``, ``reasoning``, ``no_progress_limit``), and answers
``soulacy_resolve_policy``. A stricter deployment policy wraps that hook in a plugin of its own.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import pluggy

from soulacy.kernel import (
    AgentSpec,
    CliCommand,
    CliContext,
    ConfigError,
    ConfigIssue,
    ConfigSection,
    Duration,
    Kernel,
    Location,
    Settings,
    format_duration,
    hookimpl,
    structure,
)
from soulacy.kernel.policy import DURATION_FIELDS, ExecutionPolicy, Limit, ModelCapacity

from . import hookspecs
from ._model import (
    AgentBudget,
    Budget,
    CostsConfig,
    Price,
    Reasoning,
    RequestOverrides,
    RuntimeConfig,
    StudioConfig,
    Timeouts,
)
from ._resolve import resolve, workspace_limit
from ._validate import AGENT_RANGES, WORKSPACE_RANGES, check_ranges, check_timeout_order

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
    "StudioConfig",
    "Timeouts",
    "resolve",
]


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # the limit reader, for other plugins (studio)


@hookimpl
def soulacy_workspace_limit(config: Settings, path: str, unlimited_at: Any) -> Limit[Any] | None:
    """The policy's own reader of workspace limits, for plugins that need one (studio)."""
    try:
        return workspace_limit(config, path, unlimited_at=unlimited_at)
    except KeyError:  # not a key of this plugin's sections: another owner may answer
        return None


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [
        ConfigSection("runtime", RuntimeConfig, doc="turns, budgets and timeouts"),
        ConfigSection("costs", CostsConfig, doc="per-response output allowances"),
        ConfigSection("llm.studio", StudioConfig, doc="allowances of one Studio build"),
        ConfigSection("max_turns", int | None, scope="agent"),
        ConfigSection("budget", AgentBudget | None, scope="agent"),
        ConfigSection("run_timeout", Duration | None, scope="agent"),
        ConfigSection("reasoning", Reasoning, scope="agent"),
        ConfigSection("no_progress_limit", int | None, scope="agent"),
    ]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    return [*check_ranges(config, WORKSPACE_RANGES), *check_timeout_order(config)]


@hookimpl
def soulacy_validate_agent(agent: AgentSpec) -> Sequence[ConfigIssue]:
    return list(check_ranges(agent.settings, AGENT_RANGES))


def _overrides(raw: Mapping[str, Any] | RequestOverrides | None) -> RequestOverrides:
    if isinstance(raw, RequestOverrides):
        return raw
    overrides: RequestOverrides = structure(
        dict(raw or {}), RequestOverrides, origin="request", key="overrides"
    )
    issues = list(check_ranges_of(overrides))
    if issues:
        raise ConfigError(issues)
    return overrides


def check_ranges_of(overrides: RequestOverrides) -> list[ConfigIssue]:
    """The same ranges as the agent keys of the same meaning."""
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
    agent = kernel.agent(agent_id)
    llm = agent.section("llm")
    capacity = kernel.hook.soulacy_model_capacity(
        kernel=kernel, provider=llm.provider, model=llm.model
    )
    return resolve(agent_id, kernel.config, agent.settings, _overrides(overrides), capacity)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "policy show",
            "the resolved execution policy of an agent, with sources",
            _policy_show,
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
    rows = [(name, _shown(name, limit), limit) for name, limit in policy.limits().items()]
    width = max(len(name) for name, _, _ in rows)
    value_width = max(len(shown) for _, shown, _ in rows)
    for name, shown, limit in rows:
        where = f" ({limit.location})" if limit.location else ""
        line = f"  {name:<{width}}  {shown:<{value_width}}  {limit.source}{where}"
        if limit.reason:
            line += f"; {limit.reason}"
        ctx.print(line)
    return 0


def _shown(name: str, limit: Limit[Any]) -> str:
    if limit.value is None:
        return "unlimited"
    if name in DURATION_FIELDS:
        return format_duration(limit.value)
    return str(limit.value)
