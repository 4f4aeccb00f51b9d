"""Migration 8: a row of ``run_events`` holds a batch of a run's events (docs/performance/0085).
A version 7 database, one row per event, migrates by adding one column; its rows are read as
they are, and a run goes on with rows of batches after them."""

from __future__ import annotations

import json

import psycopg
import pytest

from soulacy.contrib.postgres import PostgresStore, _schema
from soulacy.kernel.store import RunEvent, RunEventBatch, RunEvents


def shown(found: RunEvents | None) -> tuple[int, list[tuple[int, str, str]]] | None:
    if found is None:
        return None
    return found.first_kept, [(e.id, e.name, e.data["text"]) for e in found.events]


def version_7_database(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as the release of schema 7 left it: run "old", one row per event (1-5 deltas
    of alice), and its result, 6."""
    with monkeypatch.context() as patched:
        patched.setattr(_schema, "MIGRATIONS", _schema.MIGRATIONS[:7])
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _schema.migrate(conn) == 0
    with psycopg.connect(dsn) as conn:
        for i in range(1, 7):
            name, data = ("result", {"text": "done"}) if i == 6 else ("delta", {"text": f"t{i}"})
            conn.execute(
                "INSERT INTO run_events (run_id, id, name, data, principal, created_at,"
                " lease_token) VALUES ('old', %s, %s, %s, 'alice',"
                " extract(epoch FROM clock_timestamp()), NULL)",
                (i, name, json.dumps(data)),
            )


async def test_a_version_7_database_s_run_events_are_read_the_same_after_its_migration(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version_7_database(database, monkeypatch)
    store = PostgresStore(database)
    old = [(i, "delta", f"t{i}") for i in range(1, 6)] + [(6, "result", "done")]
    try:
        assert await store.open() == 7
        assert shown(await store.run_events("old", 0)) == (1, old)
        assert shown(await store.run_events("old", 3, limit=2)) == (1, old[3:5])
        assert await store.wait_run_events("old", 5, 5.0) is True
        later = [RunEvent(i, "delta", {"text": f"t{i}"}) for i in (7, 8, 9)]
        await store.append_run_events([RunEventBatch("old", "alice", later)], 5)
        assert shown(await store.run_events("old", 5)) == (
            5,
            [(6, "result", "done"), (7, "delta", "t7"), (8, "delta", "t8"), (9, "delta", "t9")],
        )
    finally:
        await store.aclose()
    with psycopg.connect(database) as conn:
        found = conn.execute("SELECT id, last_id FROM run_events ORDER BY id").fetchall()
        assert found == [(5, None), (6, None), (7, 9)]
        assert _schema.schema_version(conn) == _schema.SCHEMA_VERSION == 8
