"""Migration 5: the lease tokens that fence a run's shared events. A version 4 database
migrates by adding two columns; its run events read as before, and a retry's log is fenced
from then on (docs/storage.md, Run events)."""

from __future__ import annotations

import psycopg
import pytest

from soulacy.contrib.postgres import PostgresStore, _schema
from soulacy.kernel.store import LeaseOwner, RunEvent, RunEventBatch, RunRecord


def version_4_database(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as the release of schema 4 left it: a run of attempt 1 and two events."""
    with monkeypatch.context() as patched:
        patched.setattr(_schema, "MIGRATIONS", _schema.MIGRATIONS[:4])
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _schema.migrate(conn) == 0
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO runs (run_id, agent_id, session_id, principal, status, started_at,"
            " attempt, lease_key) VALUES ('R', 'a', 'S', 'alice', 'completed', 1.0, 1, 'k')"
        )
        for n, name, data in ((1, "run", '{"text": "old"}'), (2, "result", '{"status": "x"}')):
            conn.execute(
                "INSERT INTO run_events (run_id, id, name, data, principal, created_at)"
                " VALUES ('R', %s, %s, %s, 'alice', 1e12)",
                (n, name, data),
            )


async def test_a_version_4_database_migrates_and_its_runs_go_on(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version_4_database(database, monkeypatch)
    store = PostgresStore(database)
    try:
        assert await store.open() == 4
        found = await store.run_events("R", 0)
        assert found is not None
        assert [(e.id, e.name) for e in found.events] == [(1, "run"), (2, "result")]
        owner = LeaseOwner("o", 1, "another-host.invalid")
        first = (await store.acquire_lease("k", owner, 0.0, holder="R")).lease
        retry = (await store.acquire_lease("k", LeaseOwner("p", 1, "h"), 60.0, holder="R")).lease
        assert first is not None
        assert retry is not None
        await store.start_run(RunRecord("R", "a", "S", principal="alice"), retry)
        begun = [RunEvent(1, "run", {"text": "new"})]
        written = await store.append_run_events(
            [RunEventBatch("R", "alice", begun, True, retry)], 9
        )
        assert written == []
        stale = [RunEvent(2, "result", {"status": "failed"})]
        refused = await store.append_run_events(
            [RunEventBatch("R", "alice", stale, False, first)], 9
        )
        assert refused == ["R"]
        found = await store.run_events("R", 0)
        assert found is not None
        assert [(e.id, e.name, dict(e.data)) for e in found.events] == [(1, "run", {"text": "new"})]
    finally:
        await store.aclose()
    with psycopg.connect(database) as conn:
        tokens = conn.execute("SELECT lease_token FROM runs WHERE run_id = 'R'").fetchall()
    assert tokens == [(retry.token,)]
