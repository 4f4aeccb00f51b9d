"""Committed writes per second: the SQLite store plugin against raw sqlite3, same pragmas.

Each write is one committed transaction holding one turn (one small message), the unit the
engine persists per turn; the raw floor is a single-row INSERT committed the same way (WAL,
synchronous=NORMAL, BEGIN IMMEDIATE). Both run side by side in one process, alternating.
Also the store's part of one W2 run (``--run-turns``): its calls in the engine's order, fenced
by the conversation's lease (the reads before the first turn, ``start_run``, a tool turn per
turn, ``finish_run``, ``finalize_proof``), per turn. And 64 proofs finalized concurrently,
failures counted.

    python bench/store_writes.py [--writes 3000] [--rounds 3] [--run-turns 200]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import LeaseOwner, RunRecord, ToolRecord
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.plugins.sqlite_store._schema import migrate


def raw_rate(path: Path, writes: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, session TEXT, role TEXT, content TEXT,"
        " created REAL)"
    )
    started = time.perf_counter()
    for n in range(writes):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO t (session, role, content, created) VALUES (?, ?, ?, ?)",
            ("s", "tool", f"ok-{n}", time.time()),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return writes / elapsed


def raw_schema_rate(path: Path, writes: int) -> float:
    """The same row into the store's own table (its indexes included), through bare sqlite3."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    migrate(conn)
    started = time.perf_counter()
    for n in range(writes):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
            " created_at, tool_call_id, tool_calls, name, is_error)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("agent", "s", "bench", "tool", f"ok-{n}", time.time(), f"c{n}", None, None, 0),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return writes / elapsed


async def store_rate(path: Path, writes: int) -> float:
    store = SQLiteStore(path)
    run = RunRecord("bench", "agent", "s")
    await store.start_run(run)
    started = time.perf_counter()
    for n in range(writes):
        await store.record_turn(run, [Message("tool", f"ok-{n}", tool_call_id=f"c{n}")], [])
    elapsed = time.perf_counter() - started
    await store.aclose()
    return writes / elapsed


async def store_run(path: Path, turns: int) -> float:
    """µs per turn of the store's calls for one engine run of ``turns`` tool turns."""
    store = SQLiteStore(path)
    await store.open()  # W2 creates the file before its clock too
    owner = LeaseOwner("bench", 1, "host", "boot")
    calls = [ToolCall(f"call-{n}", "step", {"i": n}) for n in range(turns)]
    started = time.perf_counter()
    lease = (await store.acquire_lease("conversation", owner, 60, holder="r", queue=True)).lease
    assert lease is not None
    await store.cancel_requests(-1)  # the lease watcher's first look
    await store.get_run("r")
    await store.load_tool_records("r")
    await store.load_history("agent", "s")
    run = await store.start_run(RunRecord("r", "agent", "s"), lease)
    await store.record_turn(run, [Message("user", "go")], [], lease)
    for n, call in enumerate(calls):
        tool = Message("tool", f"ok-{n}", tool_call_id=call.id, name="step")
        record = ToolRecord("r", call.id, "step", {"i": n}, f"ok-{n}", False)
        await store.record_turn(
            run, [Message("assistant", "", tool_calls=(call,)), tool], [record], lease
        )
    await store.record_turn(run, [Message("assistant", "done")], [], lease)
    await store.finish_run("r", {"status": "completed"}, lease)
    await store.finalize_proof("r", {"status": "completed"}, (), lease)
    await store.release_lease(lease)
    elapsed = time.perf_counter() - started
    await store.aclose()
    return elapsed / turns * 1e6


async def concurrent_proofs(path: Path, count: int = 64) -> tuple[int, int]:
    store = SQLiteStore(path)
    runs = [RunRecord(f"r{n}", "agent", f"s{n}") for n in range(count)]
    for run in runs:
        await store.start_run(run)
        await store.record_turn(run, [], [ToolRecord(run.run_id, "c", "t", {}, "r", False)])
    failures = 0

    async def finalize(run: RunRecord) -> None:
        nonlocal failures
        try:
            await store.finalize_proof(run.run_id, {"status": "completed"})
        except Exception:
            failures += 1

    async with trio.open_nursery() as nursery:
        for run in runs:
            nursery.start_soon(finalize, run)
    stored = sum([await store.get_proof(r.run_id) is not None for r in runs])
    await store.aclose()
    return failures, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run-turns", type=int, default=200, help="turns of the W2-shaped run")
    args = parser.parse_args()
    raw: list[float] = []
    schema: list[float] = []
    plugin: list[float] = []
    runs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):  # alternating, side by side
            raw.append(raw_rate(Path(tmp, f"raw{round_}.db"), args.writes))
            schema.append(raw_schema_rate(Path(tmp, f"schema{round_}.db"), args.writes))
            plugin.append(trio.run(store_rate, Path(tmp, f"store{round_}.db"), args.writes))
            runs.append(trio.run(store_run, Path(tmp, f"run{round_}.db"), args.run_turns))
        failures, stored = trio.run(concurrent_proofs, Path(tmp, "proofs.db"))
    r, q, p = (statistics.median(x) for x in (raw, schema, plugin))
    print("| path | committed writes/s (median) | min-max |")
    print("|---|---|---|")
    for name, values, median in (
        ("raw sqlite3, one-column table, WAL + NORMAL", raw, r),
        ("raw sqlite3, the store's table and indexes", schema, q),
        ("SQLite store plugin, record_turn", plugin, p),
    ):
        print(f"| {name} | {median:,.0f} | {min(values):,.0f}-{max(values):,.0f} |")
    print(f"\nplugin / raw: {p / r:.2f}; plugin / raw with the store's schema: {p / q:.2f}")
    turn = statistics.median(runs)
    print(
        f"the store's part of a {args.run_turns}-turn run: {turn:,.1f} µs/turn"
        f" ({min(runs):,.1f}-{max(runs):,.1f}), {turn * r / 1e6:.2f}x one raw commit"
    )
    print(f"64 concurrent proof finalizations: {failures} failures, {stored} proofs stored")


if __name__ == "__main__":
    main()
