"""Reply metadata kept once per attempt (schema 4, docs/decisions/0045): ``finish_run`` writes
one row whatever the run's length, reads join the metadata in, a schema-3 database with history
reads the same once migrated, and a database of a newer schema is refused and left as it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from soulacy.contrib.postgres import SCHEMA_VERSION, PostgresStore, copy_sqlite
from soulacy.contrib.postgres._schema import MIGRATIONS, SCHEMA_TABLE
from soulacy.kernel.messages import Message
from soulacy.kernel.store import EVERY_PRINCIPAL, LeaseOwner, RunRecord, StorageError
from soulacy.plugins.sqlite_store import SQLiteStore

# The tables a run's writes can touch: finish_run's rows are counted in each.
TABLES = ("runs", "conversation_history", "attempt_endings", "tool_records", "proofs")


def rows(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(query, args).fetchall())


def written_with_run(dsn: str, run_id: str) -> dict[str, int]:
    """Rows per table written by the transaction that last wrote the run's row (its xid is
    the xmin of every row version it wrote): after finish_run, what finish_run wrote."""
    found = {}
    for table in TABLES:
        if rows(dsn, "SELECT to_regclass(%s)", table) == [(None,)]:
            continue  # an earlier schema's
        (count,) = rows(
            dsn,
            f"SELECT count(*) FROM {table} WHERE xmin = (SELECT xmin FROM runs WHERE run_id = %s)",
            run_id,
        )[0]
        if count:
            found[table] = int(count)
    return found


def ending(run_id: str, status: str) -> dict[str, Any]:
    return {"run_id": run_id, "status": status, "verification": "unverified"}


async def long_run(store: PostgresStore, run_id: str, turns: int) -> RunRecord:
    run = await store.start_run(RunRecord(run_id, "agent", f"s-{run_id}"))
    for n in range(turns):
        await store.record_turn(
            run, [Message("assistant", f"step {n}"), Message("tool", "ok", name="t")], []
        )
    return run


async def test_finish_run_writes_one_row_whatever_the_runs_length(database: str) -> None:
    store = PostgresStore(database, pool_size=2)
    try:
        for run_id, turns in (("short", 1), ("long", 60)):
            await long_run(store, run_id, turns)
            await store.finish_run(run_id, ending(run_id, "completed"))
            assert written_with_run(database, run_id) == {"runs": 1}, run_id
            entries = await store.history(f"s-{run_id}")
            assert len(entries) == 2 * turns
            assert {json.dumps(e.metadata, sort_keys=True) for e in entries} == {
                json.dumps(ending(run_id, "completed"), sort_keys=True)
            }
    finally:
        await store.aclose()


async def test_start_run_of_a_retry_reads_and_writes_no_history(database: str) -> None:
    store = PostgresStore(database, pool_size=2)
    try:
        await long_run(store, "r", 30)
        await store.start_run(RunRecord("r", "agent", "s-r"))  # attempt 1 crashed: a retry
        assert written_with_run(database, "r") == {"runs": 1, "attempt_endings": 1}
        entries = await store.history("s-r")
        assert {(e.attempt, json.dumps(e.metadata)) for e in entries} == {
            (1, json.dumps({"attempt": 1, "status": "interrupted"}))
        }
    finally:
        await store.aclose()


async def test_the_join_gives_each_principal_its_own_runs_metadata_only(database: str) -> None:
    store = PostgresStore(database, pool_size=2)
    owner = LeaseOwner.current("test")
    try:
        runs = {}
        for run_id, principal in (("ra", "alice"), ("rb", "bob"), ("rn", None)):
            runs[run_id] = await store.start_run(
                RunRecord(run_id, "agent", "shared", principal=principal)
            )
            await store.record_turn(runs[run_id], [Message("user", f"from {run_id}")], [])
        await store.finish_run("ra", ending("ra", "completed"))
        grant = await store.acquire_lease("run:rb", owner, 3600, holder="rb")
        await store.start_run(runs["rb"], grant.lease)  # bob's second attempt
        second = await store.get_run("rb")
        assert second is not None
        assert second.attempt == 2
        await store.record_turn(second, [Message("user", "bob again")], [], grant.lease)
        await store.finish_run("rb", ending("rb", "failed"), grant.lease)

        def seen(entries: list[Any]) -> list[tuple[str, str | None, Any]]:
            return [(e.content, e.principal, e.metadata and e.metadata["status"]) for e in entries]

        assert seen(await store.history("shared", principal="alice")) == [
            ("from ra", "alice", "completed")
        ]
        assert seen(await store.history("shared", "agent", "bob")) == [
            ("from rb", "bob", "interrupted"),
            ("bob again", "bob", "failed"),
        ]
        assert seen(await store.history("shared", principal=None)) == [("from rn", None, None)]
        assert [m.content for m in await store.load_history("agent", "shared", "bob")] == [
            "from rb",
            "bob again",
        ]
        assert len(await store.history("shared", principal=EVERY_PRINCIPAL)) == 4
        # Another principal's run id in the metadata of an entry: never.
        for entry in await store.history("shared"):
            if entry.metadata is not None:
                assert entry.metadata.get("run_id", entry.run_id) == entry.run_id
    finally:
        await store.aclose()


def at_schema_3(dsn: str) -> None:
    """The database as a release of schema 3 left it (its migrations, run as it ran them)."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            f"CREATE TABLE {SCHEMA_TABLE} (version INTEGER PRIMARY KEY,"
            " description TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        for migration in MIGRATIONS[:3]:
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {SCHEMA_TABLE} VALUES (%s, %s, 0)",
                (migration.version, migration.description),
            )


# What a schema-3 store wrote: every entry of a finished attempt carries its metadata, a
# crashed attempt's entries read interrupted, a running run's have none.
DONE = json.dumps({"status": "completed", "run_id": "done"})
CRASH = json.dumps({"status": "interrupted", "attempt": 1})
RETRIED = json.dumps({"status": "failed", "run_id": "retried"})
ORPHAN = json.dumps({"status": "completed", "run_id": "orphan"})
SCHEMA_3_RUNS = (
    ("done", "alice", "completed", DONE, 1),
    ("retried", "bob", "failed", RETRIED, 2),
    ("running", None, "running", None, 1),
)
SCHEMA_3_HISTORY = (  # run id, principal, content, metadata, attempt
    ("done", "alice", "d1", DONE, 1),
    ("retried", "bob", "r1", CRASH, 1),
    ("done", "alice", "d2", DONE, 1),
    ("retried", "bob", "r2", RETRIED, 2),
    ("running", None, "n1", None, 1),
    ("orphan", None, "o1", ORPHAN, 1),  # finished without a record of its run
    (None, None, "x1", None, 1),
)


def fill_schema_3(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        for run_id, principal, status, metadata, attempt in SCHEMA_3_RUNS:
            conn.execute(
                "INSERT INTO runs (run_id, agent_id, session_id, principal, status, metadata,"
                " started_at, finished_at, attempt) VALUES (%s, 'agent', 'S', %s, %s, %s, 1, %s,"
                " %s)",
                (run_id, principal, status, metadata, None if metadata is None else 2.0, attempt),
            )
        for run_id, principal, content, metadata, attempt in SCHEMA_3_HISTORY:
            conn.execute(
                "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
                " created_at, metadata, principal, attempt) VALUES ('agent', 'S', %s, 'user', %s,"
                " 1, %s, %s, %s)",
                (run_id, content, metadata, principal, attempt),
            )


async def test_a_schema_3_database_with_history_reads_the_same_once_migrated(
    database: str,
) -> None:
    at_schema_3(database)
    fill_schema_3(database)
    history_before = rows(database, "SELECT id, metadata, xmin::text FROM conversation_history")
    store = PostgresStore(database, pool_size=2)
    try:
        assert await store.open() == 3
        entries = await store.history("S")
        assert [(e.content, e.metadata and json.dumps(e.metadata)) for e in entries] == [
            (content, metadata and json.dumps(json.loads(metadata)))
            for _, _, content, metadata, _ in SCHEMA_3_HISTORY
        ]
        # Nothing of the history was rewritten: each entry keeps its own copy, read first.
        assert rows(database, "SELECT id, metadata, xmin::text FROM conversation_history") == (
            history_before
        )
        assert rows(
            database, "SELECT to_regclass('history_by_attempt'), to_regclass('attempt_endings')"
        ) == [(None, "attempt_endings")]
        applied = [v for (v,) in rows(database, f"SELECT version FROM {SCHEMA_TABLE}")]
        assert applied == list(range(1, SCHEMA_VERSION + 1))

        # The runs go on in the new layout, their earlier entries as they were.
        running = await store.get_run("running")
        assert running is not None
        await store.record_turn(running, [Message("assistant", "n2")], [])
        await store.finish_run("running", {"status": "completed", "run_id": "running"})
        await store.start_run(RunRecord("done", "agent", "S", principal="alice"))  # a retry
        done = await store.get_run("done")
        assert done is not None
        assert done.attempt == 2
        await store.record_turn(done, [Message("user", "d3")], [])

        def read(entries: list[Any]) -> list[tuple[str, int, Any]]:
            return [(e.content, e.attempt, e.metadata and e.metadata["status"]) for e in entries]

        assert read(await store.history("S")) == [
            ("d1", 1, "completed"),
            ("r1", 1, "interrupted"),
            ("d2", 1, "completed"),
            ("r2", 2, "failed"),
            ("n1", 1, "completed"),
            ("o1", 1, "completed"),
            ("x1", 1, None),
            ("n2", 1, "completed"),
            ("d3", 2, None),  # the retry runs: no ending yet
        ]
        assert read(await store.history("S", principal="alice")) == [
            ("d1", 1, "completed"),
            ("d2", 1, "completed"),
            ("d3", 2, None),
        ]
    finally:
        await store.aclose()


async def test_a_database_of_a_newer_schema_is_refused_and_left_as_it_is(database: str) -> None:
    await PostgresStore(database).open()
    with psycopg.connect(database) as conn:
        conn.execute(
            f"INSERT INTO {SCHEMA_TABLE} VALUES (%s, 'a later release', 0)", (SCHEMA_VERSION + 1,)
        )

    def snapshot() -> list[Any]:
        return rows(
            database,
            "SELECT (SELECT json_agg(s ORDER BY version) FROM soulacy_schema AS s),"
            " (SELECT count(*) FROM runs),"
            " (SELECT json_agg(c.relname ORDER BY c.relname) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'public')",
        )

    before = snapshot()
    for read_only in (False, True):
        store = PostgresStore(database, read_only=read_only)
        try:
            with pytest.raises(StorageError) as caught:
                await store.start_run(RunRecord("r", "a", "s"))
        finally:
            await store.aclose()
        message = str(caught.value)
        assert f"schema is version {SCHEMA_VERSION + 1}, written by a newer Soulacy" in message
        assert "nothing was changed" in message
    assert snapshot() == before


async def test_a_copied_file_reads_the_same_endings_as_the_file(
    database: str, tmp_path: Path
) -> None:
    source = tmp_path / "soulacy.db"
    sqlite = SQLiteStore(source)
    try:
        retried = await sqlite.start_run(RunRecord("R", "agent", "S", principal="alice"))
        await sqlite.record_turn(retried, [Message("user", "first try")], [])
        retried = await sqlite.start_run(retried)  # the first attempt crashed
        await sqlite.record_turn(retried, [Message("user", "second try")], [])
        await sqlite.finish_run("R", ending("R", "completed"))
        # An ending the file never reads: finished before its run was started, then started
        # (the SQLite store reads a current attempt's metadata from its run alone).
        early = RunRecord("E", "agent", "S", principal="bob")
        await sqlite.record_turn(early, [Message("user", "early")], [])
        await sqlite.finish_run("E", ending("E", "failed"))
        await sqlite.start_run(early)
        expected = await sqlite.history("S")
        assert [(e.content, e.metadata and e.metadata["status"]) for e in expected] == [
            ("first try", "interrupted"),
            ("second try", "completed"),
            ("early", None),
        ]
    finally:
        await sqlite.aclose()
    store = PostgresStore(database, pool_size=2)
    try:
        report = await copy_sqlite(store, source)
        assert report.copied["attempt_endings"] == 1  # R's first attempt's
        assert await store.history("S") == expected
        for principal in ("alice", "bob"):
            assert await store.history("S", principal=principal) == [
                e for e in expected if e.principal == principal
            ]
    finally:
        await store.aclose()
