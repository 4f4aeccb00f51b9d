"""Retention on the SQLite store beyond the kit: the kit's retention checks catch the planted
bugs they are written for; a state the portal wrote before schema 12 goes with its run; the
newest history entry stays (its id keeps the next ones above every earlier one)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel.messages import Message
from soulacy.kernel.store import Pruned, RetentionLimits, RunRecord
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import check_store


class ForgetsTheHighWaterMark(SQLiteStore):
    """Prunes lease rows, then forgets the greatest token they had."""

    async def prune(self, limits: RetentionLimits) -> Pruned:
        pruned = await super().prune(limits)
        await self._write("forget", lambda conn: conn.execute("DELETE FROM lease_high_water"))
        return pruned


class PrunesRunningRuns(SQLiteStore):
    """Takes every run for finished before it prunes."""

    async def prune(self, limits: RetentionLimits) -> Pruned:
        await self._write(
            "finish all",
            lambda conn: conn.execute(
                "UPDATE runs SET status = 'completed', finished_at = 0 WHERE status = 'running'"
            ),
        )
        return await super().prune(limits)


class PrunesEveryPrincipal(SQLiteStore):
    """Deletes a pruned run's session for every principal."""

    async def prune(self, limits: RetentionLimits) -> Pruned:
        def wider(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM conversation_history WHERE session_id IN (SELECT session_id"
                " FROM runs WHERE status <> 'running')"
            )

        await self._write("wider", wider)
        return await super().prune(limits)


@pytest.mark.parametrize(
    ("store", "check", "said"),
    [
        (ForgetsTheHighWaterMark, "prune_keeps_tokens_growing", "above every token granted"),
        (PrunesRunningRuns, "prune_finished_runs_only", r"prune\(runs=0\).*got \(2, 2\)"),
        (PrunesEveryPrincipal, "prune_finished_runs_only", "conversation after her finished"),
    ],
)
async def test_the_retention_checks_catch_their_planted_bugs(
    tmp_path: Path, store: type[SQLiteStore], check: str, said: str
) -> None:
    counter = iter(range(10))
    with pytest.raises(AssertionError, match=said):
        await check_store(lambda: store(tmp_path / f"{next(counter)}.db"), only=check)


async def test_a_run_state_written_before_schema_12_goes_with_its_run(tmp_path: Path) -> None:
    path = tmp_path / "soulacy.db"
    store = SQLiteStore(path)
    run = await store.start_run(RunRecord("r1", "agent", "s"))
    await store.save_state("portal.run_limits:r1", {"limits": {}})  # as the portal did
    await store.save_state("scheduler:daily", {"last": 1})
    await store.finish_run("r1", {"status": "completed"})
    await store.record_turn(
        await store.start_run(RunRecord("r2", "agent", "s")), [Message("user", "x")], []
    )
    await store.aclose()
    conn = sqlite3.connect(path)  # back to schema 11: no run_id column
    conn.execute("DROP INDEX plugin_state_by_run")
    conn.execute("ALTER TABLE plugin_state DROP COLUMN run_id")
    conn.execute("PRAGMA user_version = 11")
    conn.close()
    store = SQLiteStore(path)
    try:
        assert await store.open() == 11
        pruned = await store.prune(RetentionLimits(runs=0.0))
        assert (pruned.runs, pruned.state) == (1, 1)
        assert await store.load_state("portal.run_limits:r1") is None
        assert await store.load_state("scheduler:daily") == {"last": 1}  # of no run: kept
        assert run.run_id == "r1"
    finally:
        await store.aclose()


async def test_the_newest_history_entry_stays_so_ids_keep_growing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        run = await store.start_run(RunRecord("only", "agent", "s"))
        await store.record_turn(run, [Message("user", "a"), Message("assistant", "b")], [])
        await store.finish_run("only", {"status": "completed"})
        pruned = await store.prune(RetentionLimits(history=0.0, runs=0.0))
        assert (pruned.runs, pruned.history) == (0, 1)  # the run holds the newest entry
        entries: list[Any] = await store.history("s")
        assert [e.content for e in entries] == ["b"]
        later = await store.start_run(RunRecord("later", "agent", "s"))
        await store.record_turn(later, [Message("user", "c")], [])
        assert [e.id for e in await store.history("s")] == [2, 3]
    finally:
        await store.aclose()
