"""Reasoning strategies under the execution policy: steps, ceilings, timeouts, serialization."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio

from soulacy.kernel import ConfigError, Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.testing import Workspace, throwaway_plugin

LOOP = [{"tool": "look", "arguments": {}}]


def look() -> str:
    """Looks around (a fresh answer each time)."""
    look.calls += 1  # type: ignore[attr-defined]
    return f"saw {look.calls}"  # type: ignore[attr-defined]


look.calls = 0  # type: ignore[attr-defined]
TOOLS = throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(look)])


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    return lambda *extra: make_kernel(extra_plugins=[TOOLS, *extra], plugins=["no:sqlite_store"])


async def test_unlimited_steps_under_a_turn_ceiling_stop_at_the_ceiling(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config("runtime:\n  max_turns_ceiling: 10\n")
    workspace.scripted_agent(
        "r", LOOP, repeat=True, tools=["look"], reasoning={"strategy": "react", "max_steps": -1}
    )
    kernel = load()
    assert kernel.resolve_policy("r").reasoning_max_steps.value == 10
    result = await kernel.run("r", "explore")
    assert (result.status, result.incomplete_reason, result.llm_calls) == (
        "incomplete",
        "max_steps",
        10,
    )


async def test_an_explicit_max_steps_controls_iterations(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "r", LOOP, repeat=True, tools=["look"], reasoning={"strategy": "react", "max_steps": 3}
    )
    result = await load().run("r", "explore")
    assert (result.incomplete_reason, result.llm_calls) == ("max_steps", 3)


async def test_plan_and_execute_plans_without_tools_then_executes_each_step(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    seen: list[ModelRequest] = []

    def model(request: ModelRequest, index: int) -> ModelReply:
        # The engine hands over its live list (no copy per call): keep a snapshot.
        seen.append(attrs.evolve(request, messages=list(request.messages)))
        answers: list[Message] = [
            Message("assistant", "1. Look around\n2. Report"),
            Message("assistant", "", (ToolCall("c1", "look", {}),)),
            Message("assistant", "looked"),
            Message("assistant", "reported"),
            Message("assistant", "All done: saw things."),
        ]
        return ModelReply(answers[index], Usage(1, 1))

    provider = throwaway_plugin(
        "model",
        soulacy_provider_types=lambda: [
            ProviderType(
                "planner", lambda name, config, kernel: ScriptedProvider(name, function=model)
            )
        ],
    )
    workspace.write_agent(
        "p",
        {
            "llm": {"provider": "planner"},
            "tools": ["look"],
            "reasoning": {"strategy": "plan_execute"},
        },
    )
    result = await load(provider).run("p", "survey the room")
    assert (result.status, result.reply) == ("completed", "All done: saw things.")
    assert result.llm_calls == 5
    assert seen[0].tools == []  # planning offers no tools
    assert [t.name for t in seen[1].tools] == ["look"]
    assert "Step 1 of 2: Look around" in seen[1].messages[-1].content
    assert "Step 2 of 2: Report" in seen[3].messages[-1].content
    assert seen[4].tools == []


async def test_the_reasoning_total_timeout_ends_the_run(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: Any
) -> None:
    workspace.write_config('runtime:\n  timeouts: {llm: "0", step: "0", run: "0", http: "0"}\n')
    workspace.scripted_agent(
        "r",
        [{"text": "thinking", "sleep": 120}],
        repeat=True,
        reasoning={"strategy": "react", "total_timeout": "1m", "step_timeout": "0"},
    )
    result = await load().run("r", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "reasoning_timeout")


async def test_classic_and_reasoning_turns_of_one_conversation_serialize(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    gate = trio.Event()
    entered: list[str] = []

    async def wait() -> str:
        """Waits for the test."""
        entered.append("wait")
        await gate.wait()
        return "released"

    tools = throwaway_plugin("w", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(wait)])
    workspace.scripted_agent(
        "r",
        [{"tool": "wait"}, {"text": "done"}],
        repeat=True,
        tools=["wait"],
        reasoning={"strategy": "react"},
    )
    kernel = load(tools)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("r", "reason", session_id="s"))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: kernel.run("r", "classic", session_id="s", mode="classic"))
        await trio.testing.wait_all_tasks_blocked()
        assert entered == ["wait"]  # the classic turn waits for the reasoning exchange
        gate.set()
    assert entered == ["wait", "wait"]


def test_an_unknown_strategy_is_a_config_error(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("r", LOOP, reasoning={"strategy": "tree_of_thought"})
    with pytest.raises(ConfigError, match="unknown strategy"):
        load().agent("r")


async def test_a_plugin_adds_a_strategy(workspace: Workspace, load: Callable[..., Kernel]) -> None:
    async def answer_at_once(run: Any) -> None:
        run.complete("no thinking needed")

    plugin = throwaway_plugin(
        "fast", soulacy_reasoning_strategies=lambda: {"at_once": answer_at_once}
    )
    workspace.scripted_agent("r", LOOP, reasoning={"strategy": "at_once"})
    result = await load(plugin).run("r", "go")
    assert (result.status, result.reply) == ("completed", "no thinking needed")
