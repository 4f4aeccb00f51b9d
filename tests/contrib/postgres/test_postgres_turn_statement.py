"""A turn is one statement, its own transaction (docs/performance/0080): every row of a turn
commits together, under its lease, on both paths (one statement, and the transaction of a turn
too large for one statement's arguments)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from pg_support import Server
from psycopg import sql

from soulacy.contrib.postgres import PostgresStore, _store
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import (
    Checkpoint,
    Lease,
    LeaseLost,
    LeaseOwner,
    RunRecord,
    StateRow,
    StorageError,
    ToolRecord,
)

KEY = "conversation:agent:s"


@pytest.fixture
async def store(database: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(database, pool_size=2)
    await opened.open()
    yield opened
    await opened.aclose()


async def held(store: PostgresStore, owner: str = "a") -> Lease:
    grant = await store.acquire_lease(KEY, LeaseOwner(owner, 1, "h"), 3600.0, holder="r")
    assert grant.lease is not None
    return grant.lease


def tool_turn(n: int, calls: int = 1) -> tuple[list[Message], list[ToolRecord]]:
    asked = tuple(ToolCall(f"c{n}-{i}", "step", {"i": i}) for i in range(calls))
    messages = [Message("assistant", "", tool_calls=asked)]
    messages += [
        Message("tool", f"ok-{c.id}", tool_call_id=c.id, name="step", is_error=i == 1)
        for i, c in enumerate(asked)
    ]
    records = [
        ToolRecord("r", c.id, "step", {"i": i}, f"ok-{c.id}", i == 1, 10.0 + i)
        for i, c in enumerate(asked)
    ]
    return messages, records


def transactions(dsn: str) -> list[int]:
    """The ids of the transactions that wrote the history and the tool records, each once."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT xmin::text::bigint FROM conversation_history"
            " UNION SELECT xmin::text::bigint FROM tool_records"
        ).fetchall()
    return sorted(row[0] for row in rows)


async def test_each_turn_is_one_transaction_and_reads_back_as_written(
    store: PostgresStore, database: str
) -> None:
    lease = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    before = transactions(database)
    for n in range(3):
        messages, records = tool_turn(n, calls=n + 1)
        await store.record_turn(run, messages, records, lease)
    assert len(transactions(database)) == len(before) + 3
    history = await store.history("s")
    assert [(e.role, e.content, e.is_error) for e in history] == [
        (m.role, m.content, m.is_error) for n in range(3) for m in tool_turn(n, calls=n + 1)[0]
    ]
    assert [dict(c) for c in history[0].tool_calls] == [
        {"id": "c0-0", "name": "step", "arguments": {"i": 0}}
    ]
    records = list((await store.load_tool_records("r")).values())
    assert [(t.call_id, t.is_error, t.created_at) for t in records] == [
        (t.call_id, t.is_error, t.created_at) for n in range(3) for t in tool_turn(n, n + 1)[1]
    ]


async def test_a_turn_too_large_for_one_statement_is_still_one_transaction(
    store: PostgresStore, database: str
) -> None:
    lease = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    calls = _store.MAX_ARGUMENTS // 19 + 1  # 13 arguments a history row, 7 a tool record
    messages, records = tool_turn(0, calls)
    before = transactions(database)
    await store.record_turn(run, messages, records, lease)
    assert len(transactions(database)) == len(before) + 1
    history = await store.history("s")
    assert [e.tool_call_id for e in history] == [m.tool_call_id for m in messages]
    assert len(await store.load_tool_records("r")) == calls


@pytest.mark.parametrize("calls", [1, _store.MAX_ARGUMENTS // 19 + 1])
async def test_a_turn_under_a_lease_taken_over_writes_nothing(
    store: PostgresStore, calls: int
) -> None:
    stale = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), stale)
    await store.release_lease(stale)
    current = await held(store, owner="b")
    messages, records = tool_turn(0, calls)
    with pytest.raises(LeaseLost) as lost:
        await store.record_turn(run, messages, records, stale)
    assert (lost.value.key, lost.value.token) == (KEY, stale.token)
    assert lost.value.current is not None
    assert (lost.value.current.owner.id, lost.value.current.token) == ("b", current.token)
    assert await store.history("s") == []
    assert await store.load_tool_records("r") == {}


def state_transactions(dsn: str) -> list[int]:
    """The ids of the transactions that wrote the plugin state rows."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT DISTINCT xmin::text::bigint FROM plugin_state").fetchall()
    return sorted(row[0] for row in rows)


@pytest.mark.parametrize("calls", [1, _store.MAX_ARGUMENTS // 19 + 1])
async def test_a_turn_and_its_state_row_are_one_transaction(
    store: PostgresStore, database: str, calls: int
) -> None:
    lease = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    before = transactions(database)
    messages, records = tool_turn(0, calls)
    reserved = StateRow("effects:r", {"calls": {"c0-0": {"tool": "step"}}})
    await store.record_turn(run, messages, records, lease, state=reserved)
    written = transactions(database)
    assert len(written) == len(before) + 1
    assert state_transactions(database) == [written[-1]]  # the turn's own transaction
    assert await store.load_state("effects:r") == reserved.value
    assert len(await store.history("s")) == len(messages)
    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT run_id FROM plugin_state WHERE key = 'effects:r'").fetchone()
    assert row == ("r",)  # bound to its run: retention deletes it with the run


@pytest.mark.parametrize("calls", [1, _store.MAX_ARGUMENTS // 19 + 1])
async def test_a_turn_and_its_state_row_under_a_lease_taken_over_write_nothing(
    store: PostgresStore, calls: int
) -> None:
    stale = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), stale)
    await store.release_lease(stale)
    await held(store, owner="b")
    messages, records = tool_turn(0, calls)
    with pytest.raises(LeaseLost):
        await store.record_turn(
            run, messages, records, stale, state=StateRow("effects:r", {"calls": {}})
        )
    assert await store.history("s") == []
    assert await store.load_state("effects:r") is None


async def test_a_turn_without_a_lease_and_one_with_nothing_to_write(
    store: PostgresStore,
) -> None:
    lease = await held(store)
    run = RunRecord("r", "agent", "s")
    messages, records = tool_turn(0)
    await store.record_turn(run, messages, records)
    await store.record_turn(run, [], [], lease)  # the lease holds: nothing to say
    await store.release_lease(lease)
    with pytest.raises(LeaseLost):
        await store.record_turn(run, [], [], lease)
    assert len(await store.history("s")) == 2


async def test_a_turn_on_connections_the_server_ended_is_written_once(
    store: PostgresStore, postgres_server: Server, database: str
) -> None:
    lease = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    name = psycopg.conninfo.conninfo_to_dict(database)["dbname"]
    for n in range(3):
        with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
        messages, records = tool_turn(n)
        await store.record_turn(run, messages, records, lease)
    assert len(await store.history("s")) == 6
    assert len(await store.load_tool_records("r")) == 3


async def test_a_turn_takes_no_worker_thread_while_a_pooled_connection_is_idle(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    lease = await held(store)
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    await store.spend("k", 1.0, 10.0)  # the first spend also sweeps old counters (a thread)
    hops: list[str] = []

    async def counted(what: str, body: Any, mode: int) -> Any:
        hops.append(what)
        return await ran(what, body, mode)

    ran = store._run
    monkeypatch.setattr(store, "_run", counted)
    for n in range(3):
        messages, records = tool_turn(n)
        await store.record_turn(run, messages, records, lease)
        await store.save_state("effects:r", {"n": n}, lease, run_id="r")
        await store.spend("k", 1.0, 10.0)
        reserved = StateRow("effects:r", {"n": n + 10})
        await store.record_turn(run, [Message("user", "x")], [], lease, state=reserved)
    assert hops == []
    assert await store.load_state("effects:r") == {"n": 12}
    assert await store.counter("k") == 4.0
    assert len(await store.history("s")) == 9


async def test_statements_prepared_on_a_connection_are_prepared_again_after_a_rollback(
    database: str,
) -> None:
    # One connection: psycopg deallocates its prepared statements when a transaction on it
    # rolls back (here: a checkpoint refused under a lost lease).
    store = PostgresStore(database, pool_size=1)
    try:
        stale = await held(store)
        run = await store.start_run(RunRecord("r", "agent", "s"), stale)
        await store.record_turn(run, *tool_turn(0), stale)
        await store.release_lease(stale)
        lease = await held(store, owner="b")
        with pytest.raises(LeaseLost):
            await store.save_checkpoint(Checkpoint("r", "step", "done", "agent"), stale)
        await store.record_turn(run, *tool_turn(1), lease)
        await store.save_state("s", {"n": 1}, lease)
        assert len(await store.history("s")) == 4
    finally:
        await store.aclose()


async def test_a_statement_the_server_holds_already_is_not_an_error(database: str) -> None:
    """What a connection's statements are is remembered here only as a cache of the server's:
    a statement the server holds but the cache forgot (its answer never seen here; seen in CI
    as ``DuplicatePreparedStatement`` under two racing processes) is used, not refused; one
    the server forgot is prepared again, alone."""
    store = PostgresStore(database, pool_size=1)
    try:
        lease = await held(store)
        run = await store.start_run(RunRecord("r", "agent", "s"), lease)
        await store.record_turn(run, *tool_turn(0), lease)
        await store.save_state("s", {"n": 1}, lease)
        for session in store._statements._sessions.values():
            session.prepared.clear()  # the server still holds both
        await store.record_turn(run, *tool_turn(1), lease)
        await store.save_state("s", {"n": 2}, lease)
        assert len(await store.history("s")) == 4
        assert await store.load_state("s") == {"n": 2}
    finally:
        await store.aclose()


async def test_text_with_a_nul_is_refused_by_the_statement_as_by_psycopg(
    store: PostgresStore,
) -> None:
    lease = await held(store)
    run = RunRecord("r", "agent", "s\x00x")
    with pytest.raises(StorageError, match="record turn failed: a value the database refused"):
        await store.record_turn(run, *tool_turn(0), lease)
    assert await store.history("s") == []


async def prepared_here(store: PostgresStore) -> int:
    """How many statements the store prepared on its (one) connection."""

    def read(conn: Any) -> int:
        row = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'soulacy%%'"
        ).fetchone()
        return int(row[0])

    return await store._read("count prepared statements", read)


@pytest.mark.parametrize("prepares", [True, False])
async def test_a_connection_that_prepares_nothing_sends_each_statement_whole(
    database: str, monkeypatch: pytest.MonkeyPatch, prepares: bool
) -> None:
    store = PostgresStore(database, pool_size=1)
    configure = store._configure

    def unprepared(conn: Any) -> None:
        configure(conn)
        conn.prepare_threshold = None  # as behind a pooler in transaction mode

    if not prepares:
        monkeypatch.setattr(store, "_configure", unprepared)
    try:
        lease = await held(store)
        run = await store.start_run(RunRecord("r", "agent", "s"), lease)
        for n in range(2):
            await store.record_turn(run, *tool_turn(n), lease)
        assert await prepared_here(store) == (1 if prepares else 0)
        assert len(await store.history("s")) == 4
    finally:
        await store.aclose()


async def test_a_turn_in_a_database_of_another_encoding_reads_back_as_written(
    postgres_server: Server,
) -> None:
    name = f"soulacy_latin1_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL(
                "CREATE DATABASE {} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
                " TEMPLATE template0"
            ).format(sql.Identifier(name))
        )
    store = PostgresStore(postgres_server.dsn(name), pool_size=1)
    try:
        lease = await held(store)
        run = await store.start_run(RunRecord("r", "agent", "s"), lease)
        asked = ToolCall("c", "step", {"text": "déjà vu"})
        turn = [
            Message("assistant", "", tool_calls=(asked,)),
            Message("tool", "crème brûlée", tool_call_id="c", name="step"),
        ]
        record = ToolRecord("r", "c", "step", {"text": "déjà vu"}, "crème brûlée", False)
        await store.record_turn(run, turn, [record], lease)
        await store.save_state("s", {"dish": "crème"}, lease)
        history = await store.history("s")
        assert [e.content for e in history] == ["", "crème brûlée"]
        assert history[0].tool_calls[0]["arguments"] == {"text": "déjà vu"}
        assert await store.load_state("s") == {"dish": "crème"}
    finally:
        await store.aclose()
        with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
