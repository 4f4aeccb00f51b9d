"""Schema 14: a row of ``run_events`` holds a batch of a run's events (docs/performance/0085).
A file of schema 13, one row per event, migrates by adding one column; its rows are read as
they are, and a run goes on with rows of batches after them."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from soulacy.kernel.store import RunEvent, RunEventBatch, RunEvents
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore
from soulacy.plugins.sqlite_store._schema import MIGRATIONS


def events(*ids: int, name: str = "delta") -> list[RunEvent]:
    return [RunEvent(i, name, {"text": f"t{i}"}) for i in ids]


def shown(found: RunEvents | None) -> tuple[int, list[tuple[int, str, str]]] | None:
    if found is None:
        return None
    return found.first_kept, [(e.id, e.name, e.data["text"]) for e in found.events]


def schema_13_file(path: Path) -> Path:
    """A file as the release of schema 13 left it: run "old", one row per event (1-5 deltas
    of alice), and its result, 6."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for step in MIGRATIONS[:13]:
            step(conn)
        conn.execute("PRAGMA user_version = 13")
        for i in range(1, 7):
            name, data = ("result", {"text": "done"}) if i == 6 else ("delta", {"text": f"t{i}"})
            conn.execute(
                "INSERT INTO run_events (run_id, id, name, data, principal, created_at,"
                " lease_token) VALUES ('old', ?, ?, ?, 'alice', ?, NULL)",
                (i, name, json.dumps(data), time.time()),
            )
    finally:
        conn.close()
    return path


def rows(path: Path, run_id: str) -> list[tuple[int, int | None]]:
    with sqlite3.connect(path) as conn:
        found = conn.execute(
            "SELECT id, last_id FROM run_events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return list(found.fetchall())


async def test_a_schema_13_file_s_run_events_are_read_the_same_after_its_migration(
    tmp_path: Path,
) -> None:
    path = schema_13_file(tmp_path / "soulacy.db")
    store = SQLiteStore(path)
    try:
        await store.open()
        old = [(i, "delta", f"t{i}") for i in range(1, 6)] + [(6, "result", "done")]
        assert shown(await store.run_events("old", 0)) == (1, old)
        assert shown(await store.run_events("old", 3, limit=2)) == (1, old[3:5])
        assert await store.wait_run_events("old", 5, 5.0) is True
        assert await store.wait_run_events("old", 6, 0.05) is False
        # the run goes on (a writer of the old rows' run after the upgrade): a row of a batch
        # after rows of one event each, keep trimming across both shapes
        await store.append_run_events([RunEventBatch("old", "alice", events(7, 8, 9))], 5)
        assert shown(await store.run_events("old", 0)) == (
            5,
            [*old[4:], (7, "delta", "t7"), (8, "delta", "t8"), (9, "delta", "t9")],
        )
        assert shown(await store.run_events("old", 5)) == (
            5,
            [(6, "result", "done"), (7, "delta", "t7"), (8, "delta", "t8"), (9, "delta", "t9")],
        )
    finally:
        await store.aclose()
    assert rows(path, "old") == [(5, None), (6, None), (7, 9)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14


async def test_a_batch_of_events_is_one_row_and_keep_cuts_into_the_oldest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "soulacy.db"
    store = SQLiteStore(path)
    try:
        await store.append_run_events(
            [RunEventBatch("r", "alice", events(*range(1, 601)), restart=True)], 1000
        )
        await store.append_run_events([RunEventBatch("r", "alice", events(*range(601, 633)))], 1000)
        assert rows(path, "r") == [(1, 600), (601, 632)]
        await store.append_run_events([RunEventBatch("r", "alice", events(633))], 100)
        assert rows(path, "r") == [(534, 600), (601, 632), (633, 633)]
        found = await store.run_events("r", 0)
        assert found is not None
        assert (found.first_kept, [e.id for e in found.events]) == (534, list(range(534, 634)))
    finally:
        await store.aclose()


async def test_a_batch_of_ids_already_stored_replaces_those_events_only(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        await store.append_run_events(
            [RunEventBatch("r", "alice", events(1, 2, 3, 4, 5), restart=True)], 100
        )
        again = [RunEvent(4, "delta", {"text": "again"}), *events(5, 6, name="x")]
        await store.append_run_events([RunEventBatch("r", "alice", again)], 100)
        kept = [(1, "delta", "t1"), (2, "delta", "t2"), (3, "delta", "t3")]
        assert shown(await store.run_events("r", 0)) == (
            1,
            [*kept, (4, "delta", "again"), (5, "x", "t5"), (6, "x", "t6")],
        )
    finally:
        await store.aclose()
