"""Suspended waits (issue 40, item 3): a run still waiting for a decision after
``approvals.suspend_after`` holds no task, no concurrency slot and no lease, so runs waiting on
people never stop their principal's other work; a decision resumes the one it is for."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import CapacityError, ConfigError, Kernel, Tool, open_kernel
from soulacy.plugins.approvals import approvals_of
from soulacy.testing import Workspace, throwaway_plugin

WAITING = 30  # runs of one principal left waiting, with room for one run at a time


def counting_tools(ran: Counter[str]) -> Any:
    def delete(path: str) -> str:
        """Delete a file (counted, never really)."""
        ran[path] += 1
        return f"deleted {path}"

    tools = [Tool.from_function(delete)]
    return throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: tools)


def workspace_of_one_slot(workspace: Workspace, suspend_after: str) -> None:
    workspace.write_config(
        {
            "runtime": {"max_concurrent_sessions_per_principal": 1},
            "approvals": {"suspend_after": suspend_after},
        }
    )
    workspace.scripted_agent(
        "gated",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "deleted"}],
        tools=["delete"],
        confirm_tools=["delete"],
    )
    workspace.scripted_agent("plain", [{"text": "hello"}])


async def test_runs_waiting_on_people_leave_their_principals_slots_free(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace_of_one_slot(workspace, "1ms")
    ran: Counter[str] = Counter()
    kernel = make_kernel(extra_plugins=[counting_tools(ran)])
    async with open_kernel(kernel=kernel, services="runs"):
        for n in range(WAITING):
            result = await kernel.run("gated", "clean up", run_id=f"W{n}", principal="alice")
            assert (result.status, result.incomplete_reason) == (
                "interrupted",
                "awaiting_approval",
            )
        assert kernel.runner().holder("W0") is None  # no task left for any of them
        pending = [
            await approvals_of(kernel).decide(
                f"W{n}", "c1", approved=n == 7, approver="ann", principal="alice"
            )
            for n in (7, 8)
        ]
        other = await kernel.run("plain", "hi", principal="alice")  # the one slot is free
        assert (other.status, other.reply) == ("completed", "hello")
        assert all(d is not None and d.resume for d in pending)
        approved = pending[0]
        assert approved is not None
        resumed = await approvals_of(kernel).resume(approved.request)
        assert (resumed.status, resumed.reply, resumed.attempt) == ("completed", "deleted", 2)
        denied = pending[1]
        assert denied is not None
        refused = await approvals_of(kernel).resume(denied.request)
        assert (refused.status, refused.attempt) == ("completed", 2)
    assert ran == Counter({"a.txt": 1})  # only the approved call ran, once


async def test_without_suspension_a_waiting_run_holds_its_principals_slot(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """The observation the setting answers: with ``suspend_after: "0"`` (never) a run waiting
    for a person keeps its slot, and the principal's next run is refused."""
    workspace_of_one_slot(workspace, "0")
    kernel = make_kernel(extra_plugins=[counting_tools(Counter())])
    events = kernel.events.subscribe(buffer=float("inf"))
    async with open_kernel(kernel=kernel, services="runs"), trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("gated", "clean up", principal="alice"))
        with trio.fail_after(30):
            async for event in events:
                if event.type == "tool.approval":
                    break
        with pytest.raises(CapacityError):
            await kernel.run("plain", "hi", principal="alice")
        nursery.cancel_scope.cancel()


def test_confirm_tools_naming_no_tool_of_the_agent_is_a_configuration_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """A listing (``tools.py:delete``) where a tool's name belongs matched no call: nothing
    waited for approval, and ``config validate`` said ok."""
    workspace.scripted_agent(
        "gated", [{"text": "hi"}], tools=["delete"], confirm_tools=["delete", "tools.py:delete"]
    )
    kernel = make_kernel(extra_plugins=[counting_tools(Counter())])
    with pytest.raises(ConfigError) as info:
        kernel.validate_all()
    (problem,) = [str(issue) for issue in info.value.issues]
    assert "confirm_tools[1]: expected the name of one of the agent's tools" in problem
    assert "got 'tools.py:delete'; its tools: delete; did you mean 'delete'?" in problem
