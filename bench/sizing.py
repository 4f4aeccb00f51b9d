"""Per-unit costs for sizing a deployment on PostgreSQL: a chat, a held lease, a process.

    python bench/sizing.py [--chats 400] [--clients 16] [--leases 100] [--window 20] [--json]

One ``soulacy serve`` on a database of its own (the PostgreSQL of bench/postgres_scaling.py:
embedded, defaults kept, ``fsync=on``; or ``$SOULACY_BENCH_POSTGRES_DSN``), measured three ways:

- **a chat** (the served chat of bench/served.py: one tool call, an answer, streamed), ``--chats``
  chats from ``--clients`` clients: the server's CPU and PostgreSQL's CPU per chat (/proc),
  PostgreSQL's committed transactions per chat (``pg_stat_database.xact_commit``) and the
  notifications sent per chat (a connection of this script LISTENs on the store's channels);
  then the connections the process holds on the server (``pg_stat_activity``), loaded and idle.
- **held leases**: ``--leases`` runs in flight at once, each waiting on a slow model (a
  scripted reply after a minute) and so holding its conversation's lease, with ``leases.ttl``
  6 s and ``heartbeat`` 2 s (so that a short window holds many renewals); over ``--window``
  seconds: transactions, statements, server and PostgreSQL CPU per renewal of one lease,
  against the same window with no run in flight (the idle process: its cancellation poll and
  other loops). The default heartbeat, 10 s, makes one renewal a lease every 10 s.
- **commits with NOTIFY**: single-row inserts committed per second from 1 and
  ``--notify-writers`` connections at once, with and without a ``pg_notify`` in each
  transaction (PostgreSQL holds a lock from a notifying transaction's pre-commit to its end,
  so that notifications arrive in commit order: do such commits stop scaling?).

The figures feed docs/deploy.md's sizing section; every figure is of this machine (2 shared
cores here): per-unit costs, not capacities.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psycopg
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import postgres_scaling
import served

from soulacy.testing import Workspace

CHANNELS = ("soulacy_run_events", "soulacy_cancel")
# The held leases' heartbeat (ttl three times it): short, so that a window holds many renewals,
# and not so short that a loaded machine misses one (a lease lost ends its run).
HEARTBEAT = 2.0


def stats(admin: str, dsn: str) -> dict[str, Any]:
    """Committed transactions (reads too) of ``dsn``'s database so far, rows written (all and
    by table), and its connections now."""
    name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted,"
            " (SELECT count(*) FROM pg_stat_activity WHERE datname = d.datname)"
            " FROM pg_stat_database d WHERE datname = %s",
            (name,),
        ).fetchone()
    assert row is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
        ).fetchall()
    return {
        "commits": int(row[0]),
        "rows": int(row[1]),
        "connections": int(row[2]),
        "tables": {str(name): int(n) for name, n in tables},
    }


def table_delta(before: dict[str, Any], after: dict[str, Any], per: float) -> dict[str, float]:
    names = set(before["tables"]) | set(after["tables"])
    found = {n: after["tables"].get(n, 0) - before["tables"].get(n, 0) for n in names}
    return {n: v / per for n, v in sorted(found.items()) if v}


class Listener:
    """Counts the notifications of the store's channels (a thread of its own)."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        for channel in CHANNELS:
            self.conn.execute(f"LISTEN {channel}")
        self.count = 0

    def drain(self, seconds: float) -> None:
        for _ in self.conn.notifies(timeout=seconds):
            self.count += 1


def workspace(folder: Path, dsn: str) -> Path:
    folder = served.soulacy_workspace(folder, dsn)
    config = folder / "config.yaml"
    config.write_text(
        config.read_text() + f"leases:\n  ttl: {3 * HEARTBEAT:g}s\n  heartbeat: {HEARTBEAT:g}s\n"
    )
    ws = Workspace(folder)
    ws.scripted_agent("hold", [{"text": "held", "sleep": 60}], repeat=True)
    return folder


def start(folder: Path, logs: Path) -> served.Server:
    port = served.free_port()
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(folder), "serve"]
    process, log = served.spawn("sizing", command, logs, folder, SOULACY_SERVER__PORT=str(port))
    return served.Server(
        "sizing",
        process,
        f"http://127.0.0.1:{port}",
        "/api/v1/health",
        log,
        served.soulacy_body,
        served.ends_with_result,
    )


# A backend flushes its statistics counters at the end of a transaction at most once a second,
# and an idle one within 10 s (PGSTAT_IDLE_INTERVAL): read them only after as long a quiet time.
FLUSH = 11.0


def settled(admin: str, dsn: str) -> dict[str, Any]:
    """The counters once every backend has flushed what came before (see FLUSH)."""
    time.sleep(FLUSH)
    return stats(admin, dsn)


def window(
    server: served.Server, admin: str, dsn: str, master: int | None, seconds: float, busy: bool
) -> dict[str, float]:
    """What the server and PostgreSQL do over ``seconds`` as things stand. ``busy``: the
    process's connections work every second (they flush within a second or so), so the end
    needs no quiet time (which would count more of the same work)."""
    before = settled(admin, dsn)  # what came before flushed, even by connections now idle
    cpu, pg = server.cpu_s(), served.postgres_cpu_s(master)
    time.sleep(seconds)
    cpu, pg = server.cpu_s() - cpu, served.postgres_cpu_s(master) - pg
    after = stats(admin, dsn) if busy else settled(admin, dsn)
    return {
        "seconds": seconds,
        "commits": after["commits"] - before["commits"],
        "rows": after["rows"] - before["rows"],
        "server_cpu_ms": cpu * 1000,
        "postgres_cpu_ms": pg * 1000,
        "connections": after["connections"],
        "tables": table_delta(before, after, 1),
    }


def held_leases(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM leases WHERE owner_id IS NOT NULL AND key LIKE %s", ("%hold-%",)
        ).fetchone()
    return int(row[0]) if row else 0


async def hold(server: served.Server, runs: int, dsn: str, ready: trio.Event) -> None:
    """``runs`` chats with the slow agent, in flight until cancelled; ``ready`` once every
    one holds its lease."""
    limits = httpx.Limits(max_connections=runs, max_keepalive_connections=runs)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as http,
        trio.open_nursery() as nursery,
    ):
        for n in range(runs):
            body = {"agent_id": "hold", "text": "wait", "session_id": f"hold-{n}"}
            nursery.start_soon(partial(http.post, "/api/v1/chat", json=body))
        with trio.fail_after(120):  # the database is the one to ask: polled
            while await trio.to_thread.run_sync(held_leases, dsn) < runs:  # noqa: ASYNC110
                await trio.sleep(0.5)
        await trio.sleep(2)  # the runs' starts flushed to the counters
        ready.set()
        await trio.sleep_forever()


def commits_per_s(dsn: str, writers: int, seconds: float, notify: bool) -> float:
    """Committed single-row inserts per second from ``writers`` connections at once, each
    transaction with a ``pg_notify`` or without: does NOTIFY serialize the commits?"""
    import threading

    table = f"t_{'n' if notify else 'p'}{writers}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, v text)")
    counts = [0] * writers
    stop = time.monotonic() + seconds

    def write(n: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while time.monotonic() < stop:
                with conn.transaction():
                    conn.execute(f"INSERT INTO {table} (v) VALUES ('x')")
                    if notify:
                        conn.execute("SELECT pg_notify('sizing', 'x')")
                counts[n] += 1

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / seconds


def measure(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dsn_env = os.environ.get(postgres_scaling.ENV_DSN)
    with postgres_scaling.server(dsn_env) as admin, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        master = served.postmaster(admin)
        dsn = postgres_scaling.new_database(admin)
        logs = root / "logs"
        logs.mkdir()
        server = start(workspace(root / "ws", dsn), logs)
        server.postmaster = master
        try:
            trio.run(served.wait_healthy, server, 120.0)
            trio.run(served.drive, server, args.clients, 64, 60.0)  # warm-up
            out["idle"] = window(server, admin, dsn, master, args.window, busy=False)

            listener = Listener(dsn)
            before = settled(admin, dsn)
            chats = trio.run(served.drive, server, args.clients, args.chats, 600.0)
            listener.drain(1.0)
            after = settled(admin, dsn)
            n = chats["chats"]
            out["chat"] = {
                "chats": n,
                "errors": chats["errors"],
                "first_error": chats["first_error"],
                "clients": args.clients,
                "runs_per_s": chats["runs_per_s"],
                "server_cpu_ms": chats["cpu_ms_per_run"],
                "postgres_cpu_ms": chats["postgres_cpu_ms_per_run"],
                "commits": (after["commits"] - before["commits"]) / n,
                "rows": (after["rows"] - before["rows"]) / n,
                "notifications": listener.count / n,
                "tables": table_delta(before, after, n),
                "connections_loaded": after["connections"] - 1,  # less this script's listener
            }
            listener.conn.close()
            time.sleep(2)
            out["chat"]["connections_idle"] = stats(admin, dsn)["connections"]

            async def held() -> dict[str, float]:
                ready = trio.Event()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hold, server, args.leases, dsn, ready)
                    await ready.wait()
                    found = await trio.to_thread.run_sync(
                        partial(window, server, admin, dsn, master, args.window, busy=True)
                    )
                    nursery.cancel_scope.cancel()
                return found

            out["held"] = {"leases": args.leases, **trio.run(held)}
        finally:
            served.stop(server)
            with contextlib.suppress(psycopg.Error):
                postgres_scaling.drop_database(admin, dsn)
        if args.notify_writers:
            dsn = postgres_scaling.new_database(admin)
            try:
                out["commits_per_s"] = {
                    f"{kind}-{w}": commits_per_s(dsn, w, 3.0, kind == "notify")
                    for w in (1, args.notify_writers)
                    for kind in ("plain", "notify")
                }
            finally:
                postgres_scaling.drop_database(admin, dsn)
        out["server"] = postgres_scaling.settings(admin)
    idle, held_ = out["idle"], out["held"]
    renewals = held_["leases"] * held_["seconds"] / HEARTBEAT
    out["per_renewal"] = {
        "commits": (held_["commits"] - idle["commits"]) / renewals,
        "rows": (held_["rows"] - idle["rows"]) / renewals,
        "server_cpu_us": (held_["server_cpu_ms"] - idle["server_cpu_ms"]) * 1000 / renewals,
        "postgres_cpu_us": (held_["postgres_cpu_ms"] - idle["postgres_cpu_ms"]) * 1000 / renewals,
        "tables": {n: v / renewals for n, v in held_["tables"].items()},
    }
    return out


def fmt_tables(tables: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in tables.items())


def ms(value: float | None, unit: str = "ms") -> str:
    return "-" if value is None or value != value else f"{value:.2f} {unit}"  # None, NaN


def report(out: dict[str, Any]) -> str:
    c, idle, r = out["chat"], out["idle"], out["per_renewal"]
    per_s = 1 / idle["seconds"]
    lines = [
        "| unit | figure |",
        "|---|---|",
        f"| a chat, {c['clients']} clients: server CPU | {ms(c['server_cpu_ms'])} |",
        f"| a chat: PostgreSQL CPU | {ms(c['postgres_cpu_ms'])} |",
        f"| a chat: committed transactions | {c['commits']:.1f} |",
        f"| a chat: rows written | {c['rows']:.1f} ({fmt_tables(c['tables'])}) |",
        f"| a chat: notifications | {c['notifications']:.1f} |",
        f"| connections of one process, loaded / idle | {c['connections_loaded']} /"
        f" {c['connections_idle']} |",
        f"| an idle process: transactions / s | {idle['commits'] * per_s:.2f} |",
        f"| an idle process: server CPU, PostgreSQL CPU, per second |"
        f" {ms(idle['server_cpu_ms'] * per_s)}, {ms(idle['postgres_cpu_ms'] * per_s)} |",
        f"| a lease renewal ({out['held']['leases']} held): transactions | {r['commits']:.3f} |",
        f"| a lease renewal: rows written | {r['rows']:.2f} ({fmt_tables(r['tables'])}) |",
        f"| a lease renewal: server CPU, PostgreSQL CPU | {ms(r['server_cpu_us'], 'µs')},"
        f" {ms(r['postgres_cpu_us'], 'µs')} |",
    ]
    for key, value in out.get("commits_per_s", {}).items():
        kind, writers = key.split("-")
        what = "with a NOTIFY each" if kind == "notify" else "no NOTIFY"
        lines.append(f"| commits/s from {writers} connection(s), {what} | {value:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=400)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--leases", type=int, default=100)
    parser.add_argument("--window", type=float, default=20.0, help="seconds")
    parser.add_argument(
        "--notify-writers", type=int, default=16, help="connections committing at once (0: skip)"
    )
    parser.add_argument("--json", action="store_true", help="JSON only")
    args = parser.parse_args()
    out = measure(args)
    print(json.dumps(out))
    if not args.json:
        print()
        print(report(out))
    if out["chat"]["errors"]:  # the figures divide by the chats that succeeded: not to be used
        print(
            f"FAILED {out['chat']['errors']} chats: {out['chat']['first_error']}", file=sys.stderr
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
