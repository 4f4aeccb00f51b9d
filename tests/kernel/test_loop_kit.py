"""The tool loop and run strategy kits (Step 23), proven by planted bugs.

Every planted loop is a small correct loop (:func:`reference_loop`) with one thing wrong, and
every planted strategy a small correct one with one thing wrong; each bug's test runs the one
check it targets (``only=``) and reads its name in the failure. The builtin ``classic`` loop and
strategy and the ``reasoning`` plugin's strategies pass every check, one test per check.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest
import trio

import soulacy.plugins.classic as classic
import soulacy.plugins.reasoning as reasoning
from soulacy.kernel import hookimpl
from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message, ModelRequest
from soulacy.testing import (
    RUN_STRATEGY_CHECK_NAMES,
    TOOL_LOOP_CHECK_NAMES,
    check_run_strategy,
    check_tool_loop,
    throwaway_plugin,
)

Limit = Literal["turns", "steps"]
Loop = Callable[[Run, Limit], Awaitable[None]]
Strategy = Callable[[Run], Awaitable[None]]

# "<kit> check <name>: <what>: expected <E>, got <G>", neither part empty.
MESSAGE = re.compile(r"^[\w ]+ check \w+: .*\S.*: expected \S.*, got \S.*", re.DOTALL)


def assert_reported(exc: BaseException, kit: str, check: str) -> None:
    message = str(exc)
    assert message.startswith(f"{kit} check {check}: "), (
        f"expected the failure to name '{kit} check {check}', got {message!r}"
    )
    assert MESSAGE.match(message), (
        f"expected '<what>: expected <E>, got <G>' in the failure, got {message!r}"
    )


def step_seconds(run: Run, limit: Limit) -> float | None:
    policy = run.policy
    timeout = policy.step_timeout if limit == "turns" else policy.reasoning_step_timeout
    return None if timeout.value is None else float(timeout.value)


def loop_plugin(loop: Loop, name: str = "myloop") -> Any:
    return throwaway_plugin(name, soulacy_tool_loop=lambda: loop)


def strategy_plugin(strategy: Strategy, name: str = "mystrategy") -> Any:
    return throwaway_plugin(name, soulacy_run_strategy=lambda: strategy)


# -- a small correct tool loop, and planted bugs ----------------------------------------------


async def reference_loop(run: Run, limit: Limit = "turns") -> None:
    """Model, tools, repeat; any text reply without tool calls is the answer."""
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)


async def ignores_tool_calls(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            # BUG: the calls are never run; the model is asked again


async def answers_the_first_reply(run: Run, limit: Limit = "turns") -> None:
    await run.turn(limit)
    message = (await run.call_model()).message
    run.complete(message.content)  # BUG: even when the reply asks for tool calls


async def drops_the_results(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)
            # BUG: "keeps the context short" by sending the model no tool results
            run.messages[:] = [m for m in run.messages if m.role != "tool"]


async def nudges_every_text(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            for call in message.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)
            if not message.tool_calls and message.content.startswith("FINAL:"):
                run.complete(message.content)
                return
            # BUG: a plain answer is never taken as one
            run.messages.append(Message("user", "Say FINAL: and your answer."))


async def stops_on_a_tool_error(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:
                outcome = await run.call_tool(call.name, call.arguments, call.id)
                if outcome.is_error:  # BUG: the model never gets to read and correct it
                    raise RunStop("failed", "tool_error", error=outcome.content)


async def counts_one_turn(run: Run, limit: Limit = "turns") -> None:
    await run.turn(limit)  # BUG: one turn boundary for the whole loop: no limit is checked again
    with run.timeouts(ends_step=True):
        while True:
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)


async def calls_the_model_before_the_turn(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message  # BUG: before the budget is checked
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:
                await run.call_tool(call.name, call.arguments, call.id)
            await run.turn(limit)


async def counts_steps_as_turns(run: Run, limit: Limit = "turns") -> None:
    await reference_loop(run, "turns")  # BUG: the limit it was asked with is dropped


async def untimed_steps(run: Run, limit: Limit = "turns") -> None:
    while True:  # BUG: no run.start_step: the step timeout never applies
        await run.turn(limit)
        message = (await run.call_model()).message
        if not message.tool_calls:
            run.complete(message.content)
            return
        for call in message.tool_calls:
            await run.call_tool(call.name, call.arguments, call.id)


async def fresh_call_ids(run: Run, limit: Limit = "turns") -> None:
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)
            run.start_step(step_seconds(run, limit))
            message = (await run.call_model()).message
            if not message.tool_calls:
                run.complete(message.content)
                return
            for call in message.tool_calls:  # BUG: a new id: a retry executes the call again
                await run.call_tool(call.name, call.arguments, uuid.uuid4().hex)


LOOP_BUGS: dict[str, tuple[Loop, str]] = {
    "ignores tool calls": (ignores_tool_calls, "tool_calls"),
    "completes with the first reply, tool calls and all": (answers_the_first_reply, "tool_calls"),
    "sends the model no tool results": (drops_the_results, "results"),
    "never takes a plain answer": (nudges_every_text, "answer"),
    "stops the run on a tool error": (stops_on_a_tool_error, "tool_errors"),
    "never checks the turn limit": (counts_one_turn, "max_turns"),
    "calls the model before the turn": (calls_the_model_before_the_turn, "max_turns"),
    "counts steps as turns": (counts_steps_as_turns, "steps"),
    "does not time its steps": (untimed_steps, "step_timeout"),
    "calls tools without their call id": (fresh_call_ids, "replay"),
}


def test_every_tool_loop_check_is_proven_by_a_planted_bug() -> None:
    assert {check for _, check in LOOP_BUGS.values()} == set(TOOL_LOOP_CHECK_NAMES)


@pytest.mark.parametrize("bug", sorted(LOOP_BUGS))
async def test_the_tool_loop_kit_catches(bug: str) -> None:
    loop, check = LOOP_BUGS[bug]
    with pytest.raises(AssertionError) as caught:
        await check_tool_loop(loop_plugin(loop), only=check)
    assert_reported(caught.value, "tool loop", check)


@pytest.mark.parametrize("check", TOOL_LOOP_CHECK_NAMES)
async def test_the_classic_tool_loop_passes(check: str) -> None:
    await check_tool_loop(classic, only=check)


@pytest.mark.parametrize("check", TOOL_LOOP_CHECK_NAMES)
async def test_a_small_correct_tool_loop_passes(check: str) -> None:
    await check_tool_loop(loop_plugin(reference_loop), only=check)


class OwnLoop:
    """A strategy that runs its loop itself, as the builtin ``classic`` did before Step 23:
    the plugin's own ``soulacy_tool_loop`` is never asked for an ordinary run."""

    name = "ownloop"

    @hookimpl(tryfirst=True)
    def soulacy_run_strategy(self, run: Run) -> Strategy:
        return lambda run: reference_loop(run, "turns")

    @hookimpl(tryfirst=True)
    def soulacy_tool_loop(self) -> Loop:
        return reference_loop


@pytest.mark.parametrize("check", [c for c in TOOL_LOOP_CHECK_NAMES if c != "steps"])
async def test_a_strategy_that_runs_its_own_loop_fails_every_check(check: str) -> None:
    with pytest.raises(AssertionError, match=r"got no call of run\.tool_loop") as caught:
        await check_tool_loop(OwnLoop(), only=check)
    assert_reported(caught.value, "tool loop", check)


async def test_a_loop_the_plugin_does_not_answer_with_is_not_checked_as_its() -> None:
    silent = throwaway_plugin("silent", soulacy_tool_loop=lambda: None)
    with pytest.raises(AssertionError, match="the loop of the plugin 'classic'") as caught:
        await check_tool_loop(silent, only="answer")
    assert_reported(caught.value, "tool loop", "answer")


async def test_a_loop_that_never_ends_fails_within_the_time_given() -> None:
    async def waits(run: Run, limit: Limit = "turns") -> None:
        await trio.sleep_forever()  # for an answer that never comes

    with pytest.raises(AssertionError, match=r"expected them to end within 0\.5s") as caught:
        await check_tool_loop(loop_plugin(waits), only="answer", time_per_check=0.5)
    assert_reported(caught.value, "tool loop", "answer")


async def test_the_tool_loop_kit_runs_only_the_checks_it_is_given() -> None:
    await check_tool_loop(loop_plugin(ignores_tool_calls), only=["answer", "max_turns"])
    with pytest.raises(AssertionError, match=r"^tool loop check tool_calls: "):
        await check_tool_loop(loop_plugin(ignores_tool_calls))


async def test_the_kits_refuse_a_check_they_have_not() -> None:
    with pytest.raises(ValueError, match="tool loop kit: only= selects no check named 'nope'"):
        await check_tool_loop(loop_plugin(reference_loop), only="nope")
    with pytest.raises(ValueError, match="run strategy kit: only= selects no check named 'x'"):
        await check_run_strategy(strategy_plugin(one_shot), only=["ends", "x"])


async def test_a_plugin_the_kernels_cannot_register_is_refused() -> None:
    taken = throwaway_plugin("core", soulacy_tool_loop=lambda: reference_loop)  # a builtin's name
    with pytest.raises(ValueError, match="is not registered in the kit's kernels"):
        await check_tool_loop(taken, only="answer")


# -- run strategies ---------------------------------------------------------------------------


async def one_shot(run: Run) -> None:
    """A correct strategy that never uses tools: one turn, one model call, its answer."""
    await run.turn()
    run.complete((await run.call_model(tools=False)).message.content)


async def returns_unfinished(run: Run) -> None:
    await run.turn()
    await run.call_model()  # BUG: neither run.complete nor a RunStop


async def calls_the_model_without_a_turn(run: Run) -> None:
    # BUG: no turn boundary: nothing is counted or stored, no limit is checked
    run.complete((await run.call_model(tools=False)).message.content)


async def calls_the_provider_itself(run: Run) -> None:
    await run.turn()
    name, model = run.kernel.providers.model_of(run.agent)
    reply = await run.kernel.providers.provider(name).complete(
        ModelRequest(list(run.messages), model=model)
    )  # BUG
    run.messages.append(reply.message)
    run.complete(reply.message.content)


async def one_turn_for_every_call(run: Run) -> None:
    await run.turn()  # BUG: the budget is checked once, not before each model call
    while True:
        message = (await run.call_model()).message
        if not message.tool_calls:
            run.complete(message.content)
            return
        for call in message.tool_calls:
            await run.call_tool(call.name, call.arguments, call.id)


async def runs_tools_itself(run: Run) -> None:
    while True:
        await run.turn()
        message = (await run.call_model()).message
        if not message.tool_calls:
            run.complete(message.content)
            return
        for call in message.tool_calls:  # BUG: unvalidated, unpermitted, unrecorded
            value = run.tools[call.name].function(**call.arguments)
            run.messages.append(Message("tool", str(value), tool_call_id=call.id, name=call.name))


STRATEGY_BUGS: dict[str, tuple[Strategy, str]] = {
    "returns without ending the run": (returns_unfinished, "ends"),
    "calls the model without a turn": (calls_the_model_without_a_turn, "turns"),
    "calls the provider itself": (calls_the_provider_itself, "usage"),
    "one turn for every model call": (one_turn_for_every_call, "limits"),
    "runs tools itself": (runs_tools_itself, "tools"),
}


def test_every_run_strategy_check_is_proven_by_a_planted_bug() -> None:
    assert {check for _, check in STRATEGY_BUGS.values()} == set(RUN_STRATEGY_CHECK_NAMES)


@pytest.mark.parametrize("bug", sorted(STRATEGY_BUGS))
async def test_the_run_strategy_kit_catches(bug: str) -> None:
    strategy, check = STRATEGY_BUGS[bug]
    with pytest.raises(AssertionError) as caught:
        await check_run_strategy(strategy_plugin(strategy), only=check)
    assert_reported(caught.value, "run strategy", check)


BUILTIN_STRATEGIES: dict[str, tuple[object, dict[str, Any]]] = {
    "classic": (classic, {}),
    "react": (reasoning, {"reasoning": {"strategy": "react"}}),
    "plan_execute": (reasoning, {"reasoning": {"strategy": "plan_execute"}}),
}


@pytest.mark.parametrize("check", RUN_STRATEGY_CHECK_NAMES)
@pytest.mark.parametrize("strategy", sorted(BUILTIN_STRATEGIES))
async def test_the_builtin_strategies_pass(strategy: str, check: str) -> None:
    plugin, agent = BUILTIN_STRATEGIES[strategy]
    await check_run_strategy(plugin, agent=agent, only=check)


@pytest.mark.parametrize("check", RUN_STRATEGY_CHECK_NAMES)
async def test_a_strategy_without_tools_passes(check: str) -> None:
    await check_run_strategy(strategy_plugin(one_shot), only=check)


async def test_a_strategy_that_does_not_answer_for_the_kits_agents_is_said_so() -> None:
    # The reasoning plugin drives only agents that name a reasoning strategy.
    with pytest.raises(AssertionError, match=r"agent= gives them the SOUL\.yaml keys") as caught:
        await check_run_strategy(reasoning, only="ends")
    assert_reported(caught.value, "run strategy", "ends")
