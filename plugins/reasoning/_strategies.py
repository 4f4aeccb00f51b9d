"""The builtin reasoning strategies (``react``, ``plan_execute``) and the run-wide bound: they
drive a run, so they import the engine and trio; the plugin imports them when a run asks
(decision 0038)."""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable

import trio

from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message

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
    run.start_step(run.policy.reasoning_step_timeout.value)  # the model call is the step
    try:
        return (await run.call_model(tools=tools)).message
    finally:
        run.end_step()


def bounded(strategy: Strategy, total: float | None) -> Strategy:
    """``strategy`` within ``total`` seconds (reasoning.total_timeout); None: no bound."""

    async def run_bounded(run: Run) -> None:
        with trio.move_on_after(math.inf if total is None else total) as scope:
            await strategy(run)
        if scope.cancelled_caught:
            raise RunStop("incomplete", "reasoning_timeout")

    return run_bounded
