"""An incomplete run continues in place (``Kernel.continue_run``): the same run id as its next
attempt, its messages and tool records as they are, more turns, rather than starting over."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import Kernel, RunNotContinuable, Tool
from soulacy.testing import Workspace, throwaway_plugin

STEPS: list[dict[str, Any]] = [
    {"tool": "count", "arguments": {"n": 1}, "id": "c1"},
    {"tool": "count", "arguments": {"n": 2}, "id": "c2"},
    {"tool": "count", "arguments": {"n": 3}, "id": "c3"},
    {"text": "counted to three"},
]


@pytest.fixture
def counted() -> Counter[int]:
    return Counter()


@pytest.fixture
def kernel(
    workspace: Workspace, make_kernel: Callable[..., Kernel], counted: Counter[int]
) -> Kernel:
    # start: conversation — the script goes on from the replies in the conversation, as a
    # model would from what it said.
    workspace.scripted_agent("a", STEPS, tools=["count"], max_turns=2)
    script = workspace.path / "agents" / "a" / "script.yaml"
    script.write_text(script.read_text() + "start: conversation\n")

    def count(n: int) -> str:
        """Count (each execution is counted)."""
        counted[n] += 1
        return f"counted {n}"

    tools = [Tool.from_function(count)]
    return make_kernel(extra_plugins=[throwaway_plugin("t", soulacy_tools=lambda: tools)])


async def test_an_incomplete_run_continues_in_place_with_more_turns(
    kernel: Kernel, counted: Counter[int]
) -> None:
    first = await kernel.run("a", "count to three", run_id="R", session_id="s")
    assert (first.status, first.incomplete_reason) == ("incomplete", "max_turns")
    assert counted == Counter({1: 1, 2: 1})

    result = await kernel.continue_run("R", overrides={"max_turns": 5})
    assert (result.status, result.reply, result.attempt) == ("completed", "counted to three", 2)
    assert result.run_id == "R"
    assert result.session_id == "s"
    assert counted == Counter({1: 1, 2: 1, 3: 1})  # nothing re-executed, the rest ran once

    history = await kernel.store().load_history("a", "s")
    users = [m.content for m in history if m.role == "user"]
    assert users == ["count to three"]  # not sent again: the run went on where it stopped
    assert [m.role for m in history[-2:]] == ["tool", "assistant"]
    stored = await kernel.store().get_run("R")
    assert stored is not None
    assert (stored.status, stored.attempt) == ("completed", 2)


async def test_the_continued_runs_limits_name_their_source(kernel: Kernel) -> None:
    await kernel.run("a", "count to three", run_id="R", session_id="s")
    seen: list[dict[str, Any]] = []
    stop = kernel.events.observe(lambda event: seen.append(dict(event.data)), ("run.limits",))
    try:
        await kernel.continue_run("R", overrides={"max_turns": 5})
    finally:
        stop()
    (limits,) = seen
    assert limits["max_turns"]["value"] == 5
    assert limits["max_turns"]["source"] == "request"


async def test_a_steering_message_is_the_continued_runs_own(kernel: Kernel) -> None:
    await kernel.run("a", "count to three", run_id="R", session_id="s")
    await kernel.continue_run("R", "go on, but faster", overrides={"max_turns": 5})
    history = await kernel.store().load_history("a", "s")
    assert [m.content for m in history if m.role == "user"] == [
        "count to three",
        "go on, but faster",
    ]


async def test_only_an_incomplete_run_continues(kernel: Kernel) -> None:
    with pytest.raises(RunNotContinuable, match="no run 'nope'"):
        await kernel.continue_run("nope")
    await kernel.run("a", "count to three", run_id="R", session_id="s")
    done = await kernel.continue_run("R", overrides={"max_turns": 5})
    assert done.status == "completed"
    with pytest.raises(RunNotContinuable, match="run 'R' is completed: only a run that ended"):
        await kernel.continue_run("R")
    stored = await kernel.store().get_run("R")
    assert stored is not None
    assert stored.attempt == 2


async def test_a_conversation_ending_with_the_agents_reply_goes_on_from_continue(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("echo", [{"text": "First."}, {"text": "Second."}])
    script = workspace.path / "agents" / "echo" / "script.yaml"
    script.write_text(script.read_text() + "start: conversation\n")
    kernel = make_kernel()
    first = await kernel.run("echo", "hello", run_id="E", session_id="s")
    # As if it had stopped at a limit right after the agent's reply (a run timeout, say).
    await kernel.store().finish_run("E", {**first.metadata(), "status": "incomplete"}, None)
    done = await kernel.continue_run("E")
    assert (done.status, done.reply) == ("completed", "Second.")
    history = await kernel.store().load_history("echo", "s")
    assert [m.content for m in history if m.role == "user"] == ["hello", "Continue."]


async def test_a_workflow_run_does_not_continue(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    def echo(text: str) -> str:
        """Echo."""
        return text

    tools = [Tool.from_function(echo)]
    workspace.write_agent(
        "wf",
        {
            "tools": ["echo"],
            "workflow": {"steps": [{"id": "one", "tool": "echo", "arguments": {"text": "x"}}]},
        },
    )
    kernel = make_kernel(extra_plugins=[throwaway_plugin("t", soulacy_tools=lambda: tools)])
    done = await kernel.run("wf", "go", run_id="W", session_id="s")
    assert done.status == "completed"
    store = kernel.store()
    record = await store.get_run("W")
    assert record is not None
    # As if it had stopped at a limit: its checkpoints say it is a workflow's.
    await store.finish_run("W", {**done.metadata(), "status": "incomplete"}, None)
    with pytest.raises(RunNotContinuable, match=r"workflow's .*retry it with its run id"):
        await kernel.continue_run("W")
