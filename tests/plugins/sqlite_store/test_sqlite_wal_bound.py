"""The SQLite store keeps its write-ahead log under a stated bound (docs/storage.md): a long run
with large tool results, with checkpoints in the writer's task (no kernel) or aside in a
nursery (a kernel's, as under ``soulacy serve``)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import RunRecord, ToolRecord
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.plugins.sqlite_store._store import WAL_BOUND

RESULT_CHARS = 100_000  # runtime.max_tool_result_chars' default: the largest result stored
WIDE = "\U0001d11e"  # four bytes in UTF-8: the largest a result of RESULT_CHARS can be
TURNS = 400  # about 160 MB written: more than twice the bound


def wal_size(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


async def long_run(store: SQLiteStore, path: Path) -> tuple[int, int]:
    """A run of TURNS tool turns, each with a result of RESULT_CHARS; returns the largest WAL
    seen after a turn and the bytes the turns wrote."""
    run = await store.start_run(RunRecord("long", "agent", "s"))
    largest = written = 0
    for turn in range(TURNS):
        call = ToolCall(f"c{turn}", "fetch", {"page": turn})
        result = f"{turn:08d}" + WIDE * (RESULT_CHARS - 8)  # distinct pages, nothing shared
        record = ToolRecord("long", call.id, "fetch", {"page": turn}, result, False)
        messages = [
            Message("assistant", "", (call,)),
            Message("tool", result, (), call.id, "fetch"),
        ]
        await store.record_turn(run, messages, [record])
        written += len(result.encode())
        largest = max(largest, wal_size(path))
    return largest, written


@pytest.mark.parametrize("aside", [False, True], ids=["in the writer", "in a nursery"])
async def test_a_long_run_keeps_the_wal_under_its_stated_bound(tmp_path: Path, aside: bool) -> None:
    path = tmp_path / "soulacy.db"
    store = SQLiteStore(path)
    try:
        async with trio.open_nursery() as nursery:
            if aside:

                def start_soon(fn: Callable[..., Any], *args: Any, name: str = "") -> bool:
                    nursery.start_soon(fn, *args)
                    return True

                store.start_soon = start_soon
            largest, written = await long_run(store, path)
    finally:
        await store.aclose()
    assert written > 2 * WAL_BOUND  # the run wrote more than twice what the WAL may hold
    assert largest < WAL_BOUND, f"the WAL reached {largest} bytes (bound {WAL_BOUND})"


class CountsCheckpoints(SQLiteStore):
    truncating = 0

    async def _checkpoint(self, mode: str) -> bool:
        self.truncating += mode == "TRUNCATE"
        return await super()._checkpoint(mode)


async def test_a_reader_holding_the_log_costs_a_wait_per_step_not_per_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "soulacy.db"
    store = CountsCheckpoints(path, busy_timeout=0.05)
    await store.open()
    reader = sqlite3.connect(path, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM runs").fetchone()  # holds its snapshot
        largest, written = await long_run(store, path)
        assert largest > WAL_BOUND  # held by the reader: no checkpoint can empty it
        steps = written // (16 * 1024 * 1024)
        assert store.truncating <= steps + 2, (store.truncating, steps)
        reader.execute("COMMIT")
        await store.record_turn(
            RunRecord("long", "agent", "s", attempt=1), [Message("user", "after")], []
        )
        await store._checkpoint("TRUNCATE")  # the next one the writer or aside would run
        assert wal_size(path) == 0
    finally:
        reader.close()
        await store.aclose()
