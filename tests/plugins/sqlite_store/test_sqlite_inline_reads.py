"""The SQLite store's reads run on the Trio thread while its writes do (decision 0044)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from soulacy.kernel.messages import Message
from soulacy.kernel.store import LeaseOwner, RunRecord, ToolRecord
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.plugins.sqlite_store._store import INLINE_ROWS

OWNER = LeaseOwner("owner-1", 1, "host", "boot")


async def _stored(path: Path, synchronous: str = "NORMAL") -> SQLiteStore:
    store = SQLiteStore(path, synchronous=synchronous)
    grant = await store.acquire_lease("conv", OWNER, 60)
    run = await store.start_run(RunRecord("r1", "agent", "s1", principal="alice"), grant.lease)
    await store.record_turn(
        run,
        [Message("user", "hi"), Message("assistant", "hello")],
        [ToolRecord("r1", "c1", "read", {"p": 1}, "ok", False)],
        grant.lease,
    )
    return store


def _reads(store: SQLiteStore) -> list[Callable[[], Awaitable[Any]]]:
    """The reads of a run's start and end, and of the routes that list what was stored."""
    return [
        lambda: store.get_run("r1"),
        lambda: store.load_tool_records("r1"),
        lambda: store.load_history("agent", "s1", "alice"),
        lambda: store.history("s1"),
        lambda: store.list_runs(),
        lambda: store.get_lease("conv"),
        lambda: store.cancel_requests(-1),
        lambda: store.get_proof("r1"),
    ]


def _threads_of_statements(store: SQLiteStore) -> list[int]:
    """The thread of every statement the store's connection runs from now on."""
    seen: list[int] = []
    assert store._conn is not None
    store._conn.set_trace_callback(lambda sql: seen.append(threading.get_ident()))
    return seen


async def test_reads_run_on_the_trio_thread_with_synchronous_normal(tmp_path: Path) -> None:
    store = await _stored(tmp_path / "s.db")
    try:
        seen = _threads_of_statements(store)
        for read in _reads(store):
            await read()
        assert seen
        assert set(seen) == {threading.get_ident()}  # no worker thread: no hop
        assert [m.content for m in await store.load_history("agent", "s1", "alice")] == [
            "hi",
            "hello",
        ]
        assert await store.load_history("agent", "s1", "bob") == []  # the other principal's
    finally:
        await store.aclose()


async def test_reads_stay_in_a_worker_thread_with_synchronous_full(tmp_path: Path) -> None:
    # FULL: a commit waits for an fsync, so nothing of the store runs on the Trio thread.
    store = await _stored(tmp_path / "s.db", synchronous="FULL")
    try:
        seen = _threads_of_statements(store)
        for read in _reads(store):
            await read()
        assert seen
        assert threading.get_ident() not in seen
    finally:
        await store.aclose()


async def test_a_read_answered_busy_inline_runs_again_in_a_worker_thread(tmp_path: Path) -> None:
    store = await _stored(tmp_path / "s.db")
    trio_thread = threading.get_ident()
    ran: list[int] = []

    def read(conn: sqlite3.Connection) -> int:
        ran.append(threading.get_ident())
        if threading.get_ident() == trio_thread:
            raise sqlite3.OperationalError("database is locked")
        return int(conn.execute("SELECT count(*) FROM conversation_history").fetchone()[0])

    try:
        assert await store._read("count", read) == 2
        assert len(ran) == 2
        assert ran[0] == trio_thread
        assert ran[1] != trio_thread
    finally:
        await store.aclose()


async def test_a_read_waits_for_no_writer_of_another_connection(tmp_path: Path) -> None:
    # Another process's writer holds the write lock with a row not committed yet: a read on
    # the Trio thread answers at once (busy_timeout is 30 s) with what was committed.
    path = tmp_path / "s.db"
    store = await _stored(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute(
            "INSERT INTO conversation_history (agent_id, session_id, role, content, principal,"
            " created_at) VALUES ('agent', 's1', 'user', 'not committed', 'alice', 0)"
        )
        started = time.monotonic()
        history = await store.load_history("agent", "s1", "alice")
        assert time.monotonic() - started < 5
        assert [m.content for m in history] == ["hi", "hello"]
        other.execute("COMMIT")
        history = await store.load_history("agent", "s1", "alice")
        assert [m.content for m in history] == ["hi", "hello", "not committed"]
    finally:
        other.close()
        await store.aclose()


async def test_concurrent_reads_and_writes_of_one_store_queue(tmp_path: Path) -> None:
    # Many tasks on one connection, reads and writes mixed: each sees a whole turn or none.
    store = await _stored(tmp_path / "s.db")
    run = (await store.get_run("r1")) or RunRecord("r1", "agent", "s1", principal="alice")
    grant = await store.acquire_lease("conv", OWNER, 60)
    sizes: list[int] = []

    async def write(n: int) -> None:
        pair = [Message("user", f"q{n}"), Message("assistant", f"a{n}")]
        await store.record_turn(run, pair, [], grant.lease)

    async def read() -> None:
        sizes.append(len(await store.load_history("agent", "s1", "alice")))

    try:
        async with trio.open_nursery() as nursery:
            for n in range(20):
                nursery.start_soon(write, n)
                nursery.start_soon(read)
        assert all(size % 2 == 0 for size in sizes)
        assert len(await store.load_history("agent", "s1", "alice")) == 42
    finally:
        await store.aclose()


async def test_a_long_history_is_read_whole_with_its_rest_in_a_worker_thread(
    tmp_path: Path,
) -> None:
    # A conversation longer than INLINE_ROWS: its first rows are read on the Trio thread, the
    # rest by the same statement in a worker thread (a long read does not hold the Trio
    # thread), all of it in order and none of the other principal's.
    store = await _stored(tmp_path / "s.db")
    run = RunRecord("r1", "agent", "s1", principal="alice", attempt=1)
    other = RunRecord("r2", "agent", "s1", principal="bob")
    count = INLINE_ROWS * 2 + 7
    try:
        for start in range(0, count, 100):
            batch = [Message("user", f"m{n}") for n in range(start, min(start + 100, count))]
            await store.record_turn(run, batch, [])
            await store.record_turn(other, [Message("user", f"bob {start}")], [])
        stepped: set[int] = set()

        def step() -> int:  # called as SQLite steps a statement, on the thread stepping it
            stepped.add(threading.get_ident())
            return 0

        assert store._conn is not None
        store._conn.set_progress_handler(step, 50)
        history = await store.load_history("agent", "s1", "alice")
        assert [m.content for m in history] == ["hi", "hello"] + [f"m{n}" for n in range(count)]
        assert threading.get_ident() in stepped
        assert len(stepped) == 2  # the Trio thread, then a worker thread
        stepped.clear()
        assert len(await store.load_history("agent", "s1", "bob")) == 6
        assert stepped == {threading.get_ident()}  # a short one stays on the Trio thread
        entries = await store.history("s1", principal="alice")
        assert [e.id for e in entries] == sorted(e.id for e in entries)
        assert len(entries) == count + 2
        # The statement was finished: the connection writes again.
        await store.record_turn(run, [Message("user", "after")], [])
    finally:
        await store.aclose()
