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

import math
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import cast

import pluggy
import trio

from soulacy.kernel import AgentSpec, ConfigIssue, Kernel, Location, hookimpl
from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message

from . import hookspecs

__all__ = ["plan_execute", "react", "strategies"]

Strategy = Callable[[Run], Awaitable[None]]
REACT = (
    "Work in steps: think about what is needed, then either call a tool or, when you have"
    " what the request asks for, give the final answer."
)
PLAN = (
    "Before doing anything, write a short numbered plan for the request: one step per line."
    " Do not call tools yet."
)
FINAL = "All steps are done. Give the final answer to the original request."
_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.*\S)\s*$")


async def react(run: Run) -> None:
    """Reason and act: the tool loop, each model call a reasoning step."""
    run.messages.append(Message("user", f"[soulacy] {REACT}"))
    await run.tool_loop("steps")


async def plan_execute(run: Run) -> None:
    """Plan first (no tools), then carry out each step of the plan, then answer."""
    run.messages.append(Message("user", f"[soulacy] {PLAN}"))
    plan = (await _step(run, tools=False)).content
    items = [m.group(1) for line in plan.splitlines() if (m := _ITEM.match(line))] or [plan]
    for n, item in enumerate(items, start=1):
        run.messages.append(
            Message(
                "user",
                f"[soulacy] Step {n} of {len(items)}: {item}. Use tools as needed;"
                " reply with this step's result.",
            )
        )
        while True:
            reply = await _step(run, tools=True)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)
    run.messages.append(Message("user", f"[soulacy] {FINAL}"))
    answer = (await _step(run, tools=False)).content
    if not answer.strip():
        raise RunStop("incomplete", "empty_answer")
    run.complete(answer)


async def _step(run: Run, *, tools: bool) -> Message:
    await run.turn("steps")
    timeout = run.policy.reasoning_step_timeout.value
    with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
        return (await run.call_model(tools=tools)).message
    assert scope.cancelled_caught
    raise RunStop("incomplete", "step_timeout")


def strategies(kernel: Kernel) -> dict[str, Strategy]:
    """Every reasoning strategy by name; one name from two plugins is a PluginError."""
    found = kernel.pm.unique_contributions("soulacy_reasoning_strategies", "reasoning strategy")
    return {name: cast("Strategy", strategy) for name, (strategy, _) in found.items()}


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def soulacy_reasoning_strategies() -> Mapping[str, Strategy]:
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
    total = run.policy.reasoning_total_timeout.value

    async def bounded(run: Run) -> None:
        with trio.move_on_after(math.inf if total is None else total) as scope:
            await strategy(run)
        if scope.cancelled_caught:
            raise RunStop("incomplete", "reasoning_timeout")

    return bounded
