"""A turn of a run under its lease is one fenced INSERT, its own transaction (decision 0052)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import Lease, LeaseLost, LeaseOwner, RunRecord, StateRow, ToolRecord
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.plugins.sqlite_store._store import FENCED_ROWS

A, B = LeaseOwner.current("kernel-a"), LeaseOwner.current("kernel-b")


def parallel_turn(run_id: str, calls: int) -> tuple[list[Message], list[ToolRecord]]:
    """One assistant message asking ``calls`` tools at once, and their results."""
    asked = tuple(ToolCall(f"c{n}", "step", {"n": n}) for n in range(calls))
    messages = [Message("assistant", "", tool_calls=asked)]
    messages += [Message("tool", f"ok-{c.id}", tool_call_id=c.id, name="step") for c in asked]
    records = [ToolRecord(run_id, c.id, "step", c.arguments, f"ok-{c.id}", False) for c in asked]
    return messages, records


async def started(
    store: SQLiteStore, run_id: str, principal: str | None = None, owner: LeaseOwner = A
) -> tuple[RunRecord, Lease]:
    grant = await store.acquire_lease(f"conv:{run_id}", owner, 30, holder=run_id)
    assert grant.lease is not None
    run = RunRecord(run_id, "agent", f"s-{run_id}", principal=principal)
    return await store.start_run(run, grant.lease), grant.lease


def traced(store: SQLiteStore) -> list[str]:
    """The statements the store's connection runs from now on."""
    statements: list[str] = []
    conn = store._conn  # white box: which statements a turn costs is what is pinned here
    assert conn is not None
    conn.set_trace_callback(statements.append)
    return statements


async def test_a_tool_turn_is_one_statement_without_a_transaction_of_its_own(
    store: SQLiteStore,
) -> None:
    run, lease = await started(store, "r")
    statements = traced(store)
    messages, records = parallel_turn("r", 3)
    await store.record_turn(run, messages, records, lease)
    assert len(statements) == 1
    assert statements[0].startswith("INSERT INTO conversation_history")
    assert "WHERE EXISTS (SELECT 1 FROM leases" in statements[0]
    entries = await store.history("s-r")
    assert [(e.role, e.content) for e in entries] == [(m.role, m.content) for m in messages]
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert list(await store.load_tool_records("r")) == ["c0", "c1", "c2"]


async def test_a_turn_of_more_rows_than_one_statement_takes_is_one_transaction(
    store: SQLiteStore,
) -> None:
    run, lease = await started(store, "r")
    statements = traced(store)
    messages, records = parallel_turn("r", 2 * FENCED_ROWS)  # 2 * FENCED_ROWS + 1 rows
    await store.record_turn(run, messages, records, lease)
    assert statements[0] == "BEGIN IMMEDIATE"
    assert statements[-1] == "COMMIT"
    assert sum(s.startswith("INSERT") for s in statements) == 3
    entries = await store.history("s-r")
    assert [e.content for e in entries] == [m.content for m in messages]
    assert list(await store.load_tool_records("r")) == [f"c{n}" for n in range(2 * FENCED_ROWS)]


@pytest.mark.parametrize("calls", [1, 2 * FENCED_ROWS])
async def test_a_turn_and_its_state_row_are_one_transaction(store: SQLiteStore, calls: int) -> None:
    run, lease = await started(store, "r")
    statements = traced(store)
    messages, records = parallel_turn("r", calls)
    reserved = StateRow("effects:r", {"calls": {"c0": {"tool": "step"}}})
    await store.record_turn(run, messages, records, lease, state=reserved)
    assert (statements[0], statements[-1]) == ("BEGIN IMMEDIATE", "COMMIT")
    assert sum(s == "COMMIT" for s in statements) == 1
    assert statements[-2].startswith("INSERT INTO plugin_state")
    assert await store.load_state("effects:r") == reserved.value
    assert [e.content for e in await store.history("s-r")] == [m.content for m in messages]
    assert list(await store.load_tool_records("r")) == [f"c{n}" for n in range(calls)]


@pytest.mark.parametrize("calls", [1, 2 * FENCED_ROWS])
async def test_a_turn_and_its_state_row_under_a_lease_taken_over_write_nothing(
    store: SQLiteStore, calls: int
) -> None:
    run, lease = await started(store, "r")
    await store.release_lease(lease)
    await store.acquire_lease("conv:r", B, 30, holder="r")
    messages, records = parallel_turn("r", calls)
    with pytest.raises(LeaseLost):
        await store.record_turn(
            run, messages, records, lease, state=StateRow("effects:r", {"calls": {}})
        )
    assert await store.history("s-r") == []
    assert await store.load_state("effects:r") is None


@pytest.mark.parametrize("calls", [1, 2 * FENCED_ROWS])
async def test_a_turn_under_a_lease_taken_over_writes_nothing(
    store: SQLiteStore, calls: int
) -> None:
    run, lease = await started(store, "r")
    await store.record_turn(run, [Message("user", "go")], [], lease)
    assert await store.renew_leases([lease], 0.001)
    await trio.sleep(0.01)
    taken = await store.acquire_lease(lease.key, B, 30, holder="r")
    assert taken.acquired
    messages, records = parallel_turn("r", calls)
    with pytest.raises(LeaseLost) as lost:
        await store.record_turn(run, messages, records, lease)
    assert lost.value.current is not None
    assert lost.value.current.token == lease.token + 1
    assert [e.content for e in await store.history("s-r")] == ["go"]  # nothing of the turn
    assert await store.load_tool_records("r") == {}


async def test_a_turn_waits_for_another_connections_writer_then_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    try:
        run, lease = await started(store, "r")
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's writer holds the file
        release = threading.Timer(0.2, lambda: other.execute("COMMIT"))
        release.start()
        messages, records = parallel_turn("r", 1)
        await store.record_turn(run, messages, records, lease)  # busy inline: waits in a thread
        release.join()
        other.close()
        assert [e.content for e in await store.history("s-r")] == ["", "ok-c0"]
        assert list(await store.load_tool_records("r")) == ["c0"]
    finally:
        await store.aclose()


async def test_two_principals_turns_stay_their_own(store: SQLiteStore) -> None:
    alice, alice_lease = await started(store, "ra", principal="alice")
    bob, bob_lease = await started(store, "rb", principal="bob", owner=B)
    for n in range(3):
        a_turn, a_records = parallel_turn("ra", 1 + n)
        b_turn, b_records = parallel_turn("rb", 2)
        await store.record_turn(alice, a_turn, a_records, alice_lease)
        await store.record_turn(bob, b_turn, b_records, bob_lease)
    assert {e.principal for e in await store.history("s-ra")} == {"alice"}
    assert await store.history("s-ra", principal="bob") == []
    assert await store.history("s-rb", principal="alice") == []
    assert len(await store.load_history("agent", "s-rb", principal="bob")) == 9
    alices = await store.load_history("agent", "s-ra", principal="alice")
    assert len(alices) == (1 + 1) + (1 + 2) + (1 + 3)
    assert await store.load_history("agent", "s-ra", principal="bob") == []


def _shapes(run_id: str) -> list[tuple[list[Message], list[ToolRecord]]]:
    """Turns whose records the one-pass path places, and turns it leaves to the general one."""
    a, b = ToolCall("a", "step", {"n": 1}), ToolCall("b", "look", {"q": "x"})
    asked = Message("assistant", "", tool_calls=(a, b))
    ok_a = Message("tool", "A", tool_call_id="a", name="step")
    ok_b = Message("tool", "B", tool_call_id="b", name="look")
    failed_a = Message("tool", "boom", tool_call_id="a", name="step", is_error=True)
    rec_a = ToolRecord(run_id, "a", "step", {"n": 1}, "A", False, 2.0)
    rec_b = ToolRecord(run_id, "b", "look", {"q": "x"}, "B", False, 3.0)
    warned = ToolRecord(run_id, "b", "look", {"q": "x"}, "B without the warning", False, 3.0)
    return [
        ([Message("user", "go")], []),
        ([asked, ok_a, ok_b], [rec_a, rec_b]),
        ([asked, ok_b, ok_a], [rec_a, rec_b]),  # records in another order than their messages
        ([asked, ok_a, ok_b], [rec_b]),  # a message without its record
        ([asked, ok_a, ok_b], [rec_a, warned]),  # a record's content apart from its message's
        ([asked, failed_a], [rec_a]),  # the error status differs: kept apart
        ([asked, ok_a], [ToolRecord("other-run", "a", "step", {}, "A", False, 1.0)]),
        ([asked, ok_a], [rec_a, ToolRecord(run_id, "approval:a", "approval", {}, "{}", False)]),
        ([Message("assistant", "done")], []),
    ]


def _stored(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        history = conn.execute(
            "SELECT role, content, tool_call_id, tool_calls, name, is_error, principal,"
            " record_arguments, record_content, record_created_at FROM conversation_history"
            " ORDER BY id"
        ).fetchall()
        apart = conn.execute(
            "SELECT call_id, name, arguments, content, is_error, created_at FROM tool_records"
            " ORDER BY seq"
        ).fetchall()
        return [*history, ("apart",), *apart]
    finally:
        conn.close()


async def test_the_one_pass_path_stores_what_the_general_one_does(tmp_path: Path) -> None:
    fast, general = SQLiteStore(tmp_path / "fast.db"), SQLiteStore(tmp_path / "general.db")
    try:
        runs = [await started(store, "r", principal="alice") for store in (fast, general)]
        statements = traced(fast)
        for messages, records in _shapes("r"):
            for store, (run, lease) in zip((fast, general), runs, strict=True):
                if store is general:
                    store._homes.clear()  # white box: the turn reads the run's row instead
                await store.record_turn(run, messages, records, lease)
        assert _stored(tmp_path / "fast.db") == _stored(tmp_path / "general.db")
        assert await fast.load_tool_records("r") == await general.load_tool_records("r")
        # One statement for each turn of every record held (5), a transaction for the others.
        assert statements.count("BEGIN IMMEDIATE") == 4
        assert sum("SELECT * FROM (VALUES" in s for s in statements) == 5
        assert len(await fast.load_history("agent", "s-r", principal="alice")) == 20
    finally:
        await fast.aclose()
        await general.aclose()
