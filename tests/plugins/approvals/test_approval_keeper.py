"""The approval keeper is a seam (decision 0069): the engine asks ``soulacy_approval_keeper``
how to obtain a person's decision, so another plugin can keep approvals, and without a keeper a
call that needs a person is refused, never run unapproved."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from soulacy.kernel import Kernel, Tool, hookimpl
from soulacy.kernel.contracts import Happened
from soulacy.kernel.engine import Run
from soulacy.kernel.messages import ToolCall
from soulacy.testing import Workspace, participant_plugin, throwaway_plugin

SCRIPT: list[dict[str, Any]] = [
    {"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"},
    {"text": "finished"},
]


def tools_plugin(executions: Counter[str]) -> Any:
    def delete(path: str) -> str:
        """Delete a file (counted, never really)."""
        executions["delete"] += 1
        return f"deleted {path}"

    tools = [Tool.from_function(delete)]
    return throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: tools)


class ChatOpsKeeper:
    """A keeper of another plugin: asks nobody, says no to one path, records what it saw."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, tuple[str, ...]]] = []

    async def ask(self, run: Run, call: ToolCall, reasons: Sequence[str]) -> str | None:
        self.asked.append((run.run_id, call.id, tuple(reasons)))
        await run.save()  # what led here is stored, as a durable keeper would before waiting
        return "the on-call engineer said no" if call.arguments["path"] == "a.txt" else None


class KeeperPlugin:
    def __init__(self, keeper: ChatOpsKeeper | ItHappenedKeeper) -> None:
        self.keeper = keeper

    @hookimpl(tryfirst=True)
    def soulacy_approval_keeper(self, kernel: Kernel) -> ChatOpsKeeper | ItHappenedKeeper:
        return self.keeper


async def test_a_plugins_keeper_replaces_the_builtin_one(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", SCRIPT, tools=["delete"], confirm_tools=["delete"])
    executions: Counter[str] = Counter()
    keeper = ChatOpsKeeper()
    kernel = make_kernel(extra_plugins=[tools_plugin(executions), KeeperPlugin(keeper)])
    result = await kernel.run("a", "clean up", run_id="K1", session_id="s")
    assert result.status == "completed"
    assert keeper.asked == [("K1", "c1", ("confirm_tools lists 'delete'",))]
    assert executions == Counter()  # refused by the keeper: never ran
    records = await kernel.store().load_tool_records("K1")
    assert [(r.call_id, r.is_error) for r in records.values()] == [("c1", True)]
    assert "the on-call engineer said no" in records["c1"].content
    assert await kernel.store().list_approvals("K1") == []  # the builtin keeper was not asked


async def test_without_a_keeper_a_call_that_needs_a_person_is_refused(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", SCRIPT, tools=["delete"])
    executions: Counter[str] = Counter()
    strict = participant_plugin(needs_approval=lambda run, call: "company rule: deletes")
    kernel = make_kernel(plugins=["no:approvals"], extra_plugins=[tools_plugin(executions), strict])
    assert not kernel.pm.has_plugin("approvals")
    result = await kernel.run("a", "clean up", run_id="K2", session_id="s")
    assert result.status == "completed"
    assert executions == Counter()
    records = await kernel.store().load_tool_records("K2")
    assert list(records) == ["c1"]
    assert records["c1"].is_error
    assert "needs a person's approval (company rule: deletes)" in records["c1"].content
    assert "no plugin keeps approvals" in records["c1"].content


class ItHappenedKeeper:
    """A keeper that answers that the call happened (done by hand, say), with its result."""

    async def ask(self, run: Run, call: ToolCall, reasons: Sequence[str]) -> Happened:
        await run.save()
        return Happened(f"done by hand: {call.arguments['path']} deleted")


async def test_a_keeper_may_answer_that_the_call_happened_with_its_result(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", SCRIPT, tools=["delete"], confirm_tools=["delete"])
    executions: Counter[str] = Counter()
    keeper = KeeperPlugin(ItHappenedKeeper())
    kernel = make_kernel(extra_plugins=[tools_plugin(executions), keeper])
    result = await kernel.run("a", "clean up", run_id="K3", session_id="s")
    assert result.status == "completed"
    assert executions == Counter()  # it happened: not run
    records = await kernel.store().load_tool_records("K3")
    assert [(r.call_id, r.content, r.is_error) for r in records.values()] == [
        ("c1", "done by hand: a.txt deleted", False)
    ]
    history = await kernel.store().load_history("a", "s")
    answers = [(m.content, m.is_error) for m in history if m.role == "tool"]
    assert answers == [("done by hand: a.txt deleted", False)]  # what the model was given
