"""The builtin reasoning strategies: ReAct and plan-and-execute, as run strategies.

SOUL.yaml::

    reasoning:
      strategy: plan_execute   # or react
      max_steps: -1            # explicit: controls reasoning iterations; -1 unlimited
      step_timeout: 5m
      total_timeout: 1h

Every model call is a reasoning step, counted against ``reasoning.max_steps`` as resolved by
the execution policy (which the workspace turn ceiling still caps). Exhaustion ends the run as
incomplete (``max_steps``), never as a success. Plugins add strategies through the
``soulacy_reasoning_strategies`` hook this plugin defines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from soulacy.kernel import ConfigIssue, Location, hookimpl, lazy_exports

from . import hookspecs

if TYPE_CHECKING:  # the strategies drive runs with trio: registering does not (decision 0038)
    import pluggy

    from soulacy.kernel import AgentSpec, Kernel
    from soulacy.kernel.engine import Run

    from ._strategies import plan_execute, react

    Strategy = Callable[[Run], Awaitable[None]]

__all__ = ["plan_execute", "react", "strategies"]


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, {"react": "._strategies", "plan_execute": "._strategies"})


def strategies(kernel: Kernel) -> dict[str, Strategy]:
    """Every reasoning strategy by name; one name from two plugins is a PluginError."""
    found = kernel.pm.unique_contributions("soulacy_reasoning_strategies", "reasoning strategy")
    return {name: cast("Strategy", strategy) for name, (strategy, _) in found.items()}


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def soulacy_reasoning_strategies() -> Mapping[str, Strategy]:
    from ._strategies import plan_execute, react

    return {"react": react, "plan_execute": plan_execute}


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    name = agent.section("reasoning").strategy
    known = strategies(kernel)
    if name is None or name in known:
        return []
    loc = agent.settings.source_of("reasoning.strategy") or Location(str(agent.file))
    return [
        ConfigIssue(
            loc,
            "reasoning.strategy",
            f"unknown strategy (known: {', '.join(sorted(known))})",
            name,
            True,
        )
    ]


@hookimpl
def soulacy_run_strategy(kernel: Kernel, run: Run) -> Strategy | None:
    name = run.agent.section("reasoning").strategy
    if name is None or run.request.mode == "classic":
        return None
    strategy = strategies(kernel)[name]
    from ._strategies import bounded

    return bounded(strategy, run.policy.reasoning_total_timeout.value)
