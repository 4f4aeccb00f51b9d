"""Schema 11: the lease tokens that fence a run's shared events. A version 10 file migrates by
adding two columns; its run events read as before, and an attempt's events are judged by what
is known since (docs/storage.md, Run events)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from soulacy.kernel.store import LeaseOwner, RunEvent, RunEventBatch, RunRecord
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore
from soulacy.plugins.sqlite_store._schema import MIGRATIONS


def version_10_file(path: Path) -> None:
    """A file as Soulacy's schema 10 left it: a run of attempt 1 and two of its events."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for step in MIGRATIONS[:10]:
            step(conn)
        conn.execute("PRAGMA user_version = 10")
        conn.execute(
            "INSERT INTO runs (run_id, agent_id, session_id, principal, status, started_at,"
            " attempt, lease_key) VALUES ('R', 'a', 'S', 'alice', 'completed', 1.0, 1, 'k')"
        )
        conn.executemany(
            "INSERT INTO run_events (run_id, id, name, data, principal, created_at)"
            " VALUES ('R', ?, ?, ?, 'alice', 1e12)",
            [(1, "run", '{"text": "old"}'), (2, "result", '{"status": "completed"}')],
        )
    finally:
        conn.close()


def columns(path: Path, table: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


async def test_a_version_10_file_migrates_and_its_runs_go_on(tmp_path: Path) -> None:
    path = tmp_path / "soulacy.db"
    version_10_file(path)
    store = SQLiteStore(path)
    try:
        found = await store.run_events("R", 0)
        assert found is not None
        assert [(e.id, e.name, dict(e.data)) for e in found.events] == [
            (1, "run", {"text": "old"}),
            (2, "result", {"status": "completed"}),
        ]
        assert {"lease_token"} <= columns(path, "runs")
        assert {"lease_token"} <= columns(path, "run_events")
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
            assert conn.execute("SELECT lease_token FROM runs").fetchall() == [(None,)]
        # A retry after the upgrade: its log replaces the old one, under its lease; a batch of
        # the attempt before (its token smaller) is refused from then on.
        owner = LeaseOwner("o", 1, "another-host.invalid")
        first = (await store.acquire_lease("k", owner, 0.0, holder="R")).lease
        retry = (await store.acquire_lease("k", LeaseOwner("p", 1, "h"), 60.0, holder="R")).lease
        assert first is not None
        assert retry is not None
        await store.start_run(RunRecord("R", "a", "S", principal="alice"), retry)
        begun = [RunEvent(1, "run", {"text": "new"})]
        assert (
            await store.append_run_events([RunEventBatch("R", "alice", begun, True, retry)], 9)
            == []
        )
        stale = [RunEvent(2, "result", {"status": "failed"})]
        assert await store.append_run_events(
            [RunEventBatch("R", "alice", stale, False, first)], 9
        ) == ["R"]
        found = await store.run_events("R", 0)
        assert found is not None
        assert [(e.id, e.name) for e in found.events] == [(1, "run")]
    finally:
        await store.aclose()
