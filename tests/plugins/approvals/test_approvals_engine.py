"""Human approval of tool calls in one process, on a real SQLite file (docs/approvals.md):
the run pauses before a ``confirm_tools`` call, waits for a decision, runs or refuses it, and
the decision is a receipt of the proof."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool
from soulacy.kernel.messages import ToolCall
from soulacy.kernel.store import AlreadyDecided
from soulacy.plugins.approvals import ApprovalClosed, approvals_of
from soulacy.testing import Workspace, participant_plugin, throwaway_plugin


class Tools:
    def __init__(self) -> None:
        self.executions: Counter[str] = Counter()

    def plugin(self) -> Any:
        def delete(path: str) -> str:
            """Delete a file (counted, never really)."""
            self.executions["delete"] += 1
            return f"deleted {path}"

        def look(path: str) -> str:
            """Look at a file."""
            self.executions["look"] += 1
            return f"{path} is there"

        tools = [Tool.from_function(delete), Tool.from_function(look)]
        return throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: tools)


@pytest.fixture
def tools() -> Tools:
    return Tools()


SHORT = {"tool": "1s", "llm": "1s", "step": "1s", "run": "1s"}
SCRIPT: list[dict[str, Any]] = [
    {"tool": "look", "arguments": {"path": "a.txt"}, "id": "c1"},
    {"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c2"},
    {"text": "finished"},
]


@pytest.fixture
def load(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> Callable[..., Kernel]:
    workspace.scripted_agent("a", SCRIPT, tools=["look", "delete"], confirm_tools=["delete"])

    def load(**options: Any) -> Kernel:
        return make_kernel(extra_plugins=[tools.plugin()], **options)  # the SQLite store

    return load


async def first_event(events: trio.MemoryReceiveChannel[Event], type: str) -> Event:
    with trio.fail_after(20):
        async for event in events:
            if event.type == type:
                return event
    raise AssertionError(f"no {type} event")


async def test_an_approved_call_runs_after_the_decision_and_the_proof_says_who_approved(
    load: Callable[..., Kernel], tools: Tools
) -> None:
    kernel = load()
    events = kernel.events.subscribe(buffer=float("inf"))
    results = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await kernel.run("a", "clean up", run_id="R1", session_id="s"))

            nursery.start_soon(run)
            asked = await first_event(events, "tool.approval")
            assert asked.data["status"] == "pending"
            assert (asked.data["id"], asked.data["name"]) == ("c2", "delete")
            assert asked.data["arguments"] == {"path": "a.txt"}
            assert asked.data["reasons"] == ["confirm_tools lists 'delete'"]
            await trio.sleep(0.2)
            assert tools.executions == Counter({"look": 1})  # it waits: delete has not run
            pending = await kernel.store().list_approvals("R1", pending=True)
            assert [(r.call_id, r.tool) for r in pending] == [("c2", "delete")]
            began = time.perf_counter()
            decided = await approvals_of(kernel).decide(
                "R1", "c2", approved=True, approver="carol", decided_by="alice"
            )
            assert decided is not None
            assert (decided.woke, decided.resume) == (True, False)
            result_event = await first_event(events, "tool.approval")
            resumed_ms = (time.perf_counter() - began) * 1000
            assert result_event.data["status"] == "approved"
            assert result_event.data["approver"] == "carol"
        (result,) = results
        print(f"in-process confirm -> resume: {resumed_ms:.2f} ms")
        assert (result.status, result.reply) == ("completed", "finished")
        assert tools.executions == Counter({"look": 1, "delete": 1})
        proof = await kernel.store().get_proof("R1")
        assert proof is not None
        receipts = proof.data()["receipts"]
        assert [r["call_id"] for r in receipts] == ["c1", "approval:c2", "c2"]
        approval = receipts[1]
        assert approval["tool"] == "soulacy.approval"
        assert approval["is_error"] is False
        said = json.loads(approval["result"])
        assert (said["status"], said["approver"], said["decided_by"]) == (
            "approved",
            "carol",
            "alice",
        )
        assert said["reasons"] == ["confirm_tools lists 'delete'"]
        assert receipts[2]["result"] == "deleted a.txt"
        # A second decision of the same call is refused; the first one stands.
        with pytest.raises(AlreadyDecided, match="already approved by carol"):
            await approvals_of(kernel).decide("R1", "c2", approved=False, approver="mallory")
        stored = await kernel.store().get_approval("R1", "c2")
        assert stored is not None
        assert stored.decision is not None
        assert (stored.decision.approved, stored.decision.approver) == (True, "carol")
    finally:
        await kernel.aclose()


async def test_a_denied_call_is_a_refusal_naming_who_denied_it_and_never_runs(
    load: Callable[..., Kernel], tools: Tools
) -> None:
    kernel = load()
    events = kernel.events.subscribe(buffer=float("inf"))
    results = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await kernel.run("a", "clean up", run_id="R2", session_id="s"))

            nursery.start_soon(run)
            await first_event(events, "tool.approval")
            await approvals_of(kernel).decide(
                "R2", "c2", approved=False, approver="dave", note="keep a.txt"
            )
        (result,) = results
        assert result.status == "completed"
        assert tools.executions == Counter({"look": 1})  # delete never ran
        history = await kernel.store().history("s")
        refusal = [e for e in history if e.role == "tool" and e.tool_call_id == "c2"]
        assert len(refusal) == 1
        assert refusal[0].is_error
        assert refusal[0].content == (
            "error: the call of tool 'delete' was denied by dave: keep a.txt; it did not run"
        )
        proof = await kernel.store().get_proof("R2")
        assert proof is not None
        approval = proof.data()["receipts"][1]
        assert (approval["call_id"], approval["is_error"]) == ("approval:c2", True)
        assert json.loads(approval["result"])["status"] == "denied"
    finally:
        await kernel.aclose()


async def test_another_principal_sees_no_request_and_cannot_decide(
    load: Callable[..., Kernel], tools: Tools
) -> None:
    kernel = load()
    events = kernel.events.subscribe(buffer=float("inf"))
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                await kernel.run("a", "clean up", run_id="R3", session_id="s", principal="alice")

            nursery.start_soon(run)
            await first_event(events, "tool.approval")
            gate = approvals_of(kernel)
            store = kernel.store()
            assert (
                await gate.decide("R3", "c2", approved=True, approver="b", principal="bob") is None
            )
            assert (
                await gate.decide("R3", "c2", approved=True, approver="n", principal=None) is None
            )
            assert await store.get_approval("R3", "c2", "bob") is None
            assert await store.list_approvals("R3", "bob") == []
            assert [r.call_id for r in await store.list_approvals("R3", "alice")] == ["c2"]
            assert tools.executions["delete"] == 0
            decided = await gate.decide(
                "R3", "c2", approved=True, approver="alice", principal="alice"
            )
            assert decided is not None
        assert tools.executions["delete"] == 1
    finally:
        await kernel.aclose()


async def test_the_wait_counts_against_the_run_timeout_by_default(
    workspace: Workspace, load: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.write_config({"runtime": {"timeouts": SHORT}})
    kernel = load()
    try:
        with trio.fail_after(20):
            result = await kernel.run("a", "clean up", run_id="R4", session_id="s")
        assert (result.status, result.incomplete_reason) == ("incomplete", "run_timeout")
        assert tools.executions["delete"] == 0
        # Nothing waits any more: a late decision is refused, saying why.
        with pytest.raises(ApprovalClosed, match=r"ended \(incomplete, run_timeout\)"):
            await approvals_of(kernel).decide("R4", "c2", approved=True, approver="late")
    finally:
        await kernel.aclose()


async def test_with_wait_counts_against_timeout_false_the_wait_moves_the_deadline(
    workspace: Workspace, load: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.write_config(
        {
            "runtime": {"timeouts": SHORT},
            "approvals": {"wait_counts_against_timeout": False},
        }
    )
    kernel = load()
    events = kernel.events.subscribe(buffer=float("inf"))
    results = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await kernel.run("a", "clean up", run_id="R5", session_id="s"))

            nursery.start_soon(run)
            await first_event(events, "tool.approval")
            await trio.sleep(1.5)  # past the run timeout, waiting
            await approvals_of(kernel).decide("R5", "c2", approved=True, approver="slow")
        (result,) = results
        assert (result.status, result.reply) == ("completed", "finished")
        assert tools.executions["delete"] == 1
    finally:
        await kernel.aclose()


async def test_a_kernel_stopped_while_waiting_leaves_the_run_resumable_from_another_kernel(
    load: Callable[..., Kernel], tools: Tools
) -> None:
    first = load()
    events = first.events.subscribe(buffer=float("inf"))
    try:
        with trio.CancelScope() as stop:  # the process shutting down, mid-wait

            async def stop_when_asked() -> None:
                await first_event(events, "tool.approval")
                stop.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_when_asked)
                await first.run("a", "clean up", run_id="R6", session_id="s")
        assert [e.type for e in _drain(events)][-1] == "run.suspended"
    finally:
        await first.aclose()
    assert tools.executions == Counter({"look": 1})

    second = load()  # a new kernel on the same SQLite file
    try:
        record = await second.store().get_run("R6")
        assert record is not None
        assert record.status == "interrupted"
        gate = approvals_of(second)
        assert [r.call_id for r in await second.store().list_approvals(pending=True)] == ["c2"]
        decided = await gate.decide("R6", "c2", approved=True, approver="erin")
        assert decided is not None
        assert decided.resume  # nobody waits: resume it here
        result = await gate.resume(decided.request)
        assert (result.status, result.reply, result.attempt) == ("completed", "finished", 2)
        # The replay re-executed nothing recorded: look ran once, delete once (after approval).
        assert tools.executions == Counter({"look": 1, "delete": 1})
        proof = await second.store().get_proof("R6")
        assert proof is not None
        assert [r["call_id"] for r in proof.data()["receipts"]] == ["c1", "approval:c2", "c2"]
    finally:
        await second.aclose()


def _drain(channel: trio.MemoryReceiveChannel[Event]) -> list[Event]:
    out = []
    while True:
        try:
            out.append(channel.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_a_plugin_chooses_calls_through_the_hook_and_its_reason_is_shown(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.scripted_agent("p", SCRIPT, tools=["look", "delete"])  # no confirm_tools

    def needs_approval(run: Any, call: ToolCall) -> str | None:
        return "looking at a.txt needs a person" if call.arguments.get("path") == "a.txt" else None

    chooser = participant_plugin("chooser", needs_approval=needs_approval)
    kernel = make_kernel(extra_plugins=[tools.plugin(), chooser])
    events = kernel.events.subscribe(buffer=float("inf"))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: kernel.run("p", "go", run_id="R7", session_id="s"))
            asked = await first_event(events, "tool.approval")
            assert (asked.data["id"], asked.data["reasons"]) == (
                "c1",
                ["looking at a.txt needs a person"],
            )
            assert tools.executions["look"] == 0
            await approvals_of(kernel).decide("R7", "c1", approved=True, approver="x")
            asked = await first_event(events, "tool.approval")  # its decision
            asked = await first_event(events, "tool.approval")  # then delete's request
            assert asked.data["id"] == "c2"
            await approvals_of(kernel).decide("R7", "c2", approved=True, approver="x")
        assert tools.executions == Counter({"look": 1, "delete": 1})
    finally:
        await kernel.aclose()


async def test_a_call_the_permission_hook_refuses_is_never_put_to_a_person(
    workspace: Workspace,
    load: Callable[..., Kernel],
    make_kernel: Callable[..., Kernel],
    tools: Tools,
) -> None:
    deny = participant_plugin(
        "deny", before_tool_call=lambda run, call: "no" if call.name == "delete" else None
    )
    kernel = make_kernel(extra_plugins=[tools.plugin(), deny])
    events = kernel.events.subscribe(buffer=float("inf"))
    try:
        with trio.fail_after(20):
            result = await kernel.run("a", "clean up", run_id="R8", session_id="s")
        assert result.status == "completed"
        assert "tool.approval" not in [e.type for e in _drain(events)]
        assert await kernel.store().list_approvals("R8") == []
        assert tools.executions == Counter({"look": 1})
    finally:
        await kernel.aclose()


async def test_a_long_wait_is_not_a_stall_for_progress_detection(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.scripted_agent(
        "s", SCRIPT, tools=["look", "delete"], confirm_tools=["delete"], no_progress_limit=2
    )
    kernel = make_kernel(extra_plugins=[tools.plugin()])
    events = kernel.events.subscribe(buffer=float("inf"))
    results = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await kernel.run("s", "go", run_id="R9", session_id="s"))

            nursery.start_soon(run)
            await first_event(events, "tool.approval")
            await trio.sleep(1)
            await approvals_of(kernel).decide("R9", "c2", approved=True, approver="x")
        (result,) = results
        assert (result.status, result.reply) == ("completed", "finished")
        verdicts = [e.data["verdict"] for e in _drain(events) if e.type == "tool.result"]
        assert verdicts == ["progress"]  # delete's result, after the wait
    finally:
        await kernel.aclose()
