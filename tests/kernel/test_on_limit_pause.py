"""``on_limit: pause`` (issue 40, item 2): a run that reaches its turn limit asks a person
through the approval keeper instead of ending ``incomplete``; approved, the limit doubles and
the run goes on in place; denied, it ends as it would have."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, open_kernel
from soulacy.plugins.approvals import approvals_of
from soulacy.testing import Workspace

STEPS = [
    {"tool": "look", "arguments": {"n": 1}, "id": "c1"},
    {"tool": "look", "arguments": {"n": 2}, "id": "c2"},
    {"text": "done"},
]


def agent(workspace: Workspace, **keys: Any) -> None:
    workspace.scripted_agent("a", STEPS, tools=["tools.py:look"], max_turns=2, **keys)
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        'def look(n: int) -> str:\n    """Look."""\n    return f"saw {n}"\n'
    )


async def run_until_asked(
    kernel: Kernel, decide: Callable[[Kernel], Any]
) -> tuple[Any, list[Event]]:
    events = kernel.events.subscribe(buffer=float("inf"))
    seen: list[Event] = []
    results: list[Any] = []
    async with open_kernel(kernel=kernel, services="runs"), trio.open_nursery() as nursery:

        async def go() -> None:
            results.append(await kernel.run("a", "go", run_id="R", session_id="s"))

        nursery.start_soon(go)
        with trio.fail_after(20):
            async for event in events:
                seen.append(event)
                if event.type == "tool.approval":
                    break
        await decide(kernel)
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            break
    return results[0], seen


@pytest.mark.parametrize("where", ["agent", "workspace"])
async def test_a_run_at_its_turn_limit_waits_and_goes_on_when_approved(
    workspace: Workspace, make_kernel: Callable[..., Kernel], where: str
) -> None:
    if where == "agent":
        agent(workspace, on_limit="pause")
    else:
        agent(workspace)
        workspace.write_config({"on_limit": "pause"})

    async def approve(kernel: Kernel) -> None:
        pending = await kernel.store().list_approvals(pending=True)
        assert [(p.call_id, p.tool) for p in pending] == [("limit:max_turns:2", "continue")]
        assert "reached max_turns (2" in " ".join(pending[0].reasons)
        await approvals_of(kernel).decide("R", "limit:max_turns:2", approved=True, approver="ann")

    result, events = await run_until_asked(make_kernel(), approve)
    assert (result.status, result.reply, result.turns) == ("completed", "done", 3)
    limits = [e.data["max_turns"] for e in events if e.type == "run.limits"]
    assert [(m["value"], m["source"]) for m in limits] == [
        (2, "SOUL.yaml"),
        (4, "a person's decision (on_limit: pause)"),
    ]


async def test_denied_it_ends_incomplete_as_it_would_have(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace, on_limit="pause")

    async def deny(kernel: Kernel) -> None:
        await approvals_of(kernel).decide("R", "limit:max_turns:2", approved=False, approver="ann")

    result, _ = await run_until_asked(make_kernel(), deny)
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns")


async def test_by_default_a_run_at_its_limit_ends_incomplete_without_asking(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    kernel = make_kernel()
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns")
    assert await kernel.store().list_approvals(pending=True) == []
