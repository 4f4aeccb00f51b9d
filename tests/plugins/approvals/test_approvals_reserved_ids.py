"""A model's tool call never takes an id the engine keeps for its own questions (``cut:``,
``approval:``, ``limit:``): it is given a fresh one before anything is stored, so a model
cannot make a call that never ran look like a call cut while it ran (and tell it happened),
nor pre-decide the effect ledger's question on one of its calls (docs/approvals.md)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool
from soulacy.plugins.approvals import ApprovalResultRefused, approvals_of
from soulacy.testing import Workspace, throwaway_plugin

SAID = "deleted a.txt by hand (seen in the audit log)"


class Deletes:
    """``delete``, counted; it holds after its effect while ``hold`` is set (a crash cuts it)."""

    def __init__(self) -> None:
        self.executions: Counter[str] = Counter()
        self.hold = False
        self.held = trio.Event()  # set once a call holds after its effect

    def plugin(self) -> Any:
        async def delete(path: str) -> str:
            """Delete a file (counted, never really)."""
            self.executions["delete"] += 1
            if self.hold:
                self.held.set()
                await trio.sleep_forever()
            return f"deleted {path}"

        tools = [Tool.from_function(delete)]
        return throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: tools)


async def next_approval(events: trio.MemoryReceiveChannel[Event]) -> Event:
    with trio.fail_after(20):
        async for event in events:
            if event.type == "tool.approval":
                return event
    raise AssertionError("no tool.approval event")


def agent(workspace: Workspace, script: list[dict[str, Any]]) -> None:
    workspace.scripted_agent("a", script, tools=["delete"], confirm_tools=["delete"])
    with (workspace.path / "agents" / "a" / "script.yaml").open("a") as fh:
        fh.write("start: conversation\n")  # a retry's model goes on where the history ends


async def test_a_model_call_named_cut_gets_a_fresh_id_and_cannot_be_told_it_happened(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(
        workspace,
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "cut:c1"}, {"text": "done"}],
    )
    deletes = Deletes()
    kernel = make_kernel(extra_plugins=[deletes.plugin()])
    events = kernel.events.subscribe(buffer=float("inf"))
    gate = approvals_of(kernel)
    results = []
    try:
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await kernel.run("a", "clean up", run_id="M1", session_id="s"))

            nursery.start_soon(run)
            asked = (await next_approval(events)).data
            fresh = asked["id"]
            assert fresh != "cut:c1", "a model's call id 'cut:c1' reached the approval keeper"
            assert fresh.startswith("call_")
            assert asked["cut"] is False
            assert (
                await gate.decide("M1", "cut:c1", approved=False, approver="o", result=SAID) is None
            )
            with pytest.raises(ApprovalResultRefused, match="did not run yet"):
                await gate.decide("M1", fresh, approved=False, approver="o", result=SAID)
            await gate.decide("M1", fresh, approved=True, approver="ops")
        (result,) = results
        assert (result.status, result.reply) == ("completed", "done")
        assert deletes.executions == Counter({"delete": 1})
        # The assistant message and the call's result pair under the fresh id.
        history = await kernel.store().load_history("a", "s")
        calls = [c.id for m in history for c in m.tool_calls or ()]
        answers = [m.tool_call_id for m in history if m.role == "tool"]
        assert calls == answers == [fresh]
        proof = await kernel.store().get_proof("M1")
        assert proof is not None
        receipts = proof.data()["receipts"]
        assert [r["call_id"] for r in receipts] == [f"approval:{fresh}", fresh]
        assert receipts[1]["result"] == "deleted a.txt"
    finally:
        await kernel.aclose()


LEASES = {"ttl": "1s", "heartbeat": "400ms", "cancel_poll": "200ms"}  # a crash's lease: 1 s


async def cut_by_a_crash(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    deletes: Deletes,
    run_id: str,
    *,
    calls: int,
    confirmed: bool,
) -> None:
    """Run ``run_id`` until the effect of its last (``calls``-th) ``delete`` call happened, then
    leave the store as a crash does (a copy taken then, put back once the kernel is gone: no
    result stored). Each call's approval (``confirmed``: ``confirm_tools`` lists it) is given;
    the crashed attempt's lease, this process's own, is taken over once it expires
    (``leases.ttl`` 1 s)."""
    db, snapshot = workspace.path / "soulacy.db", workspace.path / "crashed.db"
    first = make_kernel(extra_plugins=[deletes.plugin()])
    events = first.events.subscribe(buffer=float("inf"))
    try:
        with trio.CancelScope() as crash:

            async def approve_all_then_crash() -> None:
                deletes.hold = calls == 1
                for n in range(calls if confirmed else 0):
                    asked = (await next_approval(events)).data
                    deletes.hold = n == calls - 1  # the last call's effect happens, then the crash
                    await approvals_of(first).decide(
                        run_id, asked["id"], approved=True, approver="o"
                    )
                    await next_approval(events)  # its decision
                with trio.fail_after(20):
                    await deletes.held.wait()
                with sqlite3.connect(db) as live, sqlite3.connect(snapshot) as copy:
                    live.backup(copy)
                crash.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(approve_all_then_crash)
                await first.run("a", "clean up", run_id=run_id, session_id="s")
    finally:
        await first.aclose()
    assert deletes.executions == Counter({"delete": calls})
    deletes.hold = False
    for leftover in workspace.path.glob("soulacy.db*"):
        leftover.unlink()
    snapshot.rename(db)


async def retry_told_it_happened(
    kernel: Kernel, run_id: str, call_id: str, result: str
) -> tuple[Any, list[Event]]:
    """The same-id retry, told that the cut call ``call_id`` happened with ``result`` once it
    waits: its result, and its events."""
    events = kernel.events.subscribe(buffer=float("inf"))
    results = []
    async with trio.open_nursery() as nursery:

        async def retry() -> None:
            results.append(await kernel.run("a", "clean up", run_id=run_id, session_id="s"))

        nursery.start_soon(retry)
        with trio.fail_after(20):
            while not results:
                found = await kernel.store().list_approvals(run_id, pending=True)
                if found:
                    break
                await trio.sleep(0.02)
        assert not results, "the cut call was settled without asking a person"
        (waiting,) = found
        assert (waiting.call_id, waiting.describe()["cut"]) == (call_id, True)
        await approvals_of(kernel).decide(
            run_id, call_id, approved=False, approver="o", result=result
        )
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            break
    (result_of_run,) = results
    return result_of_run, seen


async def test_a_model_call_named_cut_x_does_not_decide_the_question_on_x_when_x_is_cut(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config({"leases": LEASES})
    agent(
        workspace,
        [
            {"tool": "delete", "arguments": {"path": "a.txt"}, "id": "cut:c2"},
            {"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c2"},
            {"text": "done"},
        ],
    )
    deletes = Deletes()
    await cut_by_a_crash(workspace, make_kernel, deletes, "X1", calls=2, confirmed=True)
    second = make_kernel(extra_plugins=[deletes.plugin()])  # the same SQLite file
    try:
        result, _ = await retry_told_it_happened(second, "X1", "cut:c2", SAID)
        assert result.status == "completed"
        assert deletes.executions == Counter({"delete": 2})  # not run again
        proof = await second.store().get_proof("X1")
        assert proof is not None
        told = {r["call_id"]: r["result"] for r in proof.data()["receipts"]}
        assert told["c2"] == SAID
    finally:
        await second.aclose()


KEY = "sk-" + "a1B2" * 8  # a key the result quotes: events mask it
LONG = f"deleted a.txt by hand; the audit log says {KEY}; " + "x" * 400 + " END"


async def test_a_given_result_is_capped_for_the_model_and_only_previewed_in_events(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config({"leases": LEASES, "runtime": {"max_tool_result_chars": 90}})
    workspace.scripted_agent(
        "a",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "done"}],
        tools=["delete"],
    )
    with (workspace.path / "agents" / "a" / "script.yaml").open("a") as fh:
        fh.write("start: conversation\n")
    deletes = Deletes()
    await cut_by_a_crash(workspace, make_kernel, deletes, "L1", calls=1, confirmed=False)
    second = make_kernel(extra_plugins=[deletes.plugin()])
    try:
        result, events = await retry_told_it_happened(second, "L1", "cut:c1", LONG)
        assert result.status == "completed"
        assert deletes.executions == Counter({"delete": 1})
        # What the model got (and the history keeps) is cut as a tool's own result would be.
        history = await second.store().load_history("a", "s")
        (answer,) = [m for m in history if m.role == "tool" and m.tool_call_id == "c1"]
        assert "(runtime.max_tool_result_chars)" in answer.content, answer.content
        assert len(answer.content) < 200
        assert answer.content.endswith(" END")
        # The event: the result's length and a redacted preview of its start, never all of it.
        (told,) = [
            e.data for e in events if e.type == "tool.approval" and e.data["status"] == "happened"
        ]
        assert "result" not in told, "the tool.approval event carries the whole result"
        assert told["result_chars"] == len(LONG)
        assert KEY not in told["result_preview"]
        assert told["result_preview"].startswith("deleted a.txt by hand; the audit log says sk-")
        assert len(told["result_preview"]) <= 200
        # The store, the proof's receipt of the decision and the decision keep all of it.
        stored = await second.store().get_approval("L1", "cut:c1")
        assert stored is not None
        assert stored.decision is not None
        assert stored.decision.result == LONG
        proof = await second.store().get_proof("L1")
        assert proof is not None
        receipts = {r["call_id"]: r["result"] for r in proof.data()["receipts"]}
        assert json.loads(receipts["approval:cut:c1"])["result"] == LONG
    finally:
        await second.aclose()
