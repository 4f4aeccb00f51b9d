"""The floors under the runtime figures: raw SQLite commits/s, and SSE events/s of a bare ASGI app.

Runs in the project's venv. Each prints one JSON object.

* ``sqlite``: committed single-row INSERTs per second with raw ``sqlite3`` and Soulacy's pragmas
  (WAL, ``synchronous=NORMAL``), each INSERT its own transaction, the fastest form (also timed
  inside ``BEGIN IMMEDIATE`` … ``COMMIT``, the form before decision 0052): no runtime persists a
  turn faster than one such commit, the floor for W2. Also the raw cost of the SQL that
  Soulacy's store commits per turn (the fence's read, two history rows and a tool record, in
  its own schema), in the variants of ``TURN_VARIANTS`` (schema 9's, schema 10's, and the
  designs weighed in docs/decisions/0047), each also as a multiple of one commit.
* ``asgi``: a bare ASGI app (no framework) that streams N server-sent events per request, served
  by ``hypercorn.trio.serve`` on 127.0.0.1 (port chosen by the OS) in a child process and read by
  httpx under Trio in this one, many streams at once: 200 concurrent streams of 50 token-sized
  events (the shape of bench/http_load.py) and 8 long streams of 5,000; each once with one
  event per ``send()`` and once with 100 events per ``send()`` (and 20x the events). No HTTP
  figure of a runtime can beat these.

    python bench/floors.py sqlite [--writes 5000]
    python bench/floors.py asgi [--shapes 200x50,8x5000]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import trio

# One server-sent event shaped like the chat stream's token events (id, event name, JSON data).
EVENT = b'id: 0000001\nevent: token\ndata: {"text": "word1 "}\n\n'  # 51 bytes
HOST = "127.0.0.1"  # the benchmark never talks to anything but the loopback address


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


Writer = Callable[[int], None]  # one committed write, the n-th


def _single_rows(path: Path, transaction: bool = False) -> tuple[Writer, sqlite3.Connection]:
    """One committed single-row INSERT into a table without secondary indexes: the statement
    its own transaction (the fastest form, the floor), or in ``BEGIN IMMEDIATE`` … ``COMMIT``
    (``transaction``, the floor's form before decision 0052)."""
    conn = _connect(path)
    conn.execute(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, session TEXT, role TEXT, content TEXT,"
        " created REAL)"
    )
    insert = "INSERT INTO t (session, role, content, created) VALUES (?, ?, ?, ?)"

    def write(n: int) -> None:
        conn.execute(insert, ("s", "tool", f"ok-{n}", time.time()))

    def write_in_transaction(n: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(insert, ("s", "tool", f"ok-{n}", time.time()))
        conn.execute("COMMIT")

    return (write_in_transaction if transaction else write), conn


# The variants of a turn's SQL timed by ``_soulacy_turns`` (decisions 0044 and 0047).
TURN_VARIANTS = (
    "schema_9",
    "history_only",
    "record_in_history",
    "records_without_rowid",
    "one_statement",
)


def _soulacy_turns(path: Path, variant: str) -> tuple[Writer, sqlite3.Connection]:
    """One committed turn as Soulacy's store writes one, issued with raw sqlite3 into its
    schema (created by the store itself): the fence's read of the lease, two history rows and
    the tool record. ``variant``:

    * ``schema_9``: the tool record a row of ``tool_records`` (a rowid table and its unique
      ``(run_id, call_id)`` index): four b-trees per commit;
    * ``history_only``: no tool record at all, the floor of any design keeping two history rows;
    * ``record_in_history``: the record kept in its tool result's history row (schema 10,
      decision 0047): the history rows with the record's arguments and time, each inserted
      only while the lease holds (the fence asked by the insert, not read by a statement of its
      own; the run's row is read at the first turn only); two b-trees per commit;
    * ``records_without_rowid``: ``tool_records`` a ``WITHOUT ROWID`` table keyed
      ``(run_id, seq)``, no other index; three b-trees;
    * ``one_statement``: schema 10's rows in one fenced ``INSERT … SELECT * FROM (VALUES …)``
      that is its own transaction, no ``BEGIN``/``COMMIT`` (decision 0052): the turn as the
      store writes it now.
    """
    from soulacy.plugins.sqlite_store import SQLiteStore

    async def create() -> None:
        store = SQLiteStore(path)
        await store.open()
        await store.aclose()

    trio.run(create)
    conn = _connect(path)
    present = {row[1] for row in conn.execute("PRAGMA table_info(conversation_history)")}
    for column in ("record_arguments TEXT", "record_content TEXT", "record_created_at REAL"):
        if column.split()[0] not in present:  # schema 9: the candidate's columns, for the bench
            conn.execute(f"ALTER TABLE conversation_history ADD COLUMN {column}")
    if "first_history_id" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        conn.execute("ALTER TABLE runs ADD COLUMN first_history_id INTEGER")
    conn.execute(
        "CREATE TABLE bench_records (run_id TEXT NOT NULL, seq INTEGER NOT NULL, call_id TEXT"
        " NOT NULL, name TEXT NOT NULL, arguments TEXT NOT NULL, content TEXT NOT NULL,"
        " is_error INTEGER NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (run_id, seq))"
        " WITHOUT ROWID"
    )
    conn.execute("INSERT INTO leases (key, token, owner_id) VALUES ('conversation', 1, 'bench')")
    conn.execute(
        "INSERT INTO runs (run_id, agent_id, session_id, status, started_at, first_history_id)"
        " VALUES ('r', 'bench', 's', 'running', 0, 0)"
    )
    fence = (
        "SELECT token, owner_id, pid, host, boot, holder, acquired_at, renewed_at, expires_at"
        " FROM leases WHERE key = ?"
    )
    history = (
        "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
        " created_at, tool_call_id, tool_calls, name, is_error, principal, user_id, attempt)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    # As the store issues them (plugins/sqlite_store/_store.py, record_turn).
    held = (
        "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
        " created_at, tool_call_id, tool_calls, name, is_error, principal, user_id, attempt,"
        " record_arguments, record_content, record_created_at)"
        " SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?"
        " WHERE EXISTS (SELECT 1 FROM leases WHERE key = ? AND token = ? AND owner_id = ?)"
    )
    home = (
        "SELECT first_history_id FROM runs WHERE run_id = ? AND agent_id = ? AND session_id = ?"
        " AND principal IS ? AND user_id IS ? AND first_history_id IS NOT NULL"
    )
    tools = (
        "INSERT OR IGNORE INTO tool_records (run_id, call_id, name, arguments, content,"
        " is_error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    columns = held[: held.index(" SELECT ")]
    row = "(" + ", ".join("?" * 16) + ")"
    one_statement = (
        f"{columns} SELECT * FROM (VALUES {row}, {row})"
        " WHERE EXISTS (SELECT 1 FROM leases WHERE key = ? AND token = ? AND owner_id = ?)"
    )
    keyed = (
        "INSERT INTO bench_records (run_id, seq, call_id, name, arguments, content, is_error,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )

    def write(n: int) -> None:
        now, call = time.time(), f"call-{n}"
        calls = json.dumps([{"id": call, "name": "step", "arguments": {"i": n}}])
        arguments = json.dumps({"i": n})
        assistant = ("bench", "s", "r", "assistant", "", now, None, calls, None, 0, None, None, 1)
        result = ("bench", "s", "r", "tool", f"ok-{n}", now, call, None, "step", 0, None, None, 1)
        lease = ("conversation", 1, "bench")
        if variant == "one_statement":  # the run's row was read at its start (remembered)
            conn.execute(
                one_statement,
                (*assistant, None, None, None, *result, arguments, None, now, *lease),
            )
            return
        conn.execute("BEGIN IMMEDIATE")
        if variant == "record_in_history":
            if n == 0:  # the run's row, read at its first turn only (then remembered)
                conn.execute(home, ("r", "bench", "s", None, None)).fetchone()
            # The lease asked by the insert itself (the store reads it only when it fails).
            conn.executemany(
                held,
                [(*assistant, None, None, None, *lease), (*result, arguments, None, now, *lease)],
            )
        else:
            conn.execute(fence, ("conversation",)).fetchone()
            conn.executemany(history, [assistant, result])
        if variant == "schema_9":
            conn.execute(tools, ("r", call, "step", arguments, f"ok-{n}", 0, now))
        elif variant == "records_without_rowid":
            conn.execute(keyed, ("r", n, call, "step", arguments, f"ok-{n}", 0, now))
        conn.execute("COMMIT")

    return write, conn


BLOCK = 100  # writes of one path timed before the next path's: the paths interleave


def sqlite_floor(writes: int) -> dict[str, Any]:
    """µs per write of each path, interleaved in blocks (each block's order rotated), so that
    the machine's load and the files' growth fall on every path alike."""
    with tempfile.TemporaryDirectory(prefix="soulacy-floor-") as tmp:
        paths = {
            "commit": _single_rows(Path(tmp) / "raw.db"),
            "commit_in_transaction": _single_rows(Path(tmp) / "raw-tx.db", transaction=True),
        }
        for variant in TURN_VARIANTS:
            paths[variant] = _soulacy_turns(Path(tmp) / f"{variant}.db", variant)
        names = list(paths)
        spent = dict.fromkeys(names, 0.0)
        for block in range(0, writes, BLOCK):
            names = names[1:] + names[:1]
            for name in names:
                write = paths[name][0]
                started = time.perf_counter()
                for n in range(block, min(block + BLOCK, writes)):
                    write(n)
                spent[name] += time.perf_counter() - started
        for _, conn in paths.values():
            conn.close()
    us = {name: spent[name] / writes * 1e6 for name in spent}
    single = us.pop("commit")
    in_transaction = us.pop("commit_in_transaction")
    turns = us
    return {
        "floor": "sqlite",
        "writes": writes,
        "commits_per_s": 1e6 / single,
        "us_per_commit": single,  # the floor: the fastest committed single-row insert
        "us_per_commit_in_transaction": in_transaction,
        # The turn as the store writes it now (schema 10, one statement), under the name
        # bench/run_peers.py reads.
        "us_per_soulacy_turn_commit": turns["one_statement"],
        **{f"us_per_turn_{variant}": us for variant, us in turns.items()},
        **{f"turn_{variant}_x_commit": us / single for variant, us in turns.items()},
        "sqlite": sqlite3.sqlite_version,
    }


async def sse_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``GET /?n=N&batch=B``: N events, B per ``send()``."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    query = parse_qs(scope["query_string"].decode())
    n, batch = int(query["n"][0]), int(query["batch"][0])
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for sent in range(0, n, batch):
        body = EVENT * min(batch, n - sent)
        await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve(app: Any = None) -> None:
    """Serve ``app`` (``sse_app`` by default) on an OS-chosen loopback port; print its URL;
    stop when stdin closes."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [f"{HOST}:0"]
    config.accesslog = None
    config.errorlog = None
    stop = trio.Event()

    async def watch_stdin() -> None:
        await trio.to_thread.run_sync(sys.stdin.read)
        stop.set()

    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: hypercorn_serve(
                app or sse_app, config, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        print(binds[0], flush=True)
        nursery.start_soon(watch_stdin)


async def consume(url: str, events: int, streams: int, batch: int) -> float:
    import httpx

    received = [0] * streams

    async def one(client: httpx.AsyncClient, k: int) -> None:
        async with client.stream("GET", url, params={"n": events, "batch": batch}) as response:
            response.raise_for_status()
            async for chunk in response.aiter_raw():
                received[k] += len(chunk)

    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    async with httpx.AsyncClient(timeout=60, trust_env=False, limits=limits) as client:
        await one(client, 0)  # warm-up connection and code paths
        received[0] = 0
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for k in range(streams):
                nursery.start_soon(one, client, k)
        elapsed = time.perf_counter() - started
    want = events * len(EVENT)
    if any(r != want for r in received):
        raise AssertionError(f"received {received} bytes per stream, expected {want}")
    return events * streams / elapsed


def asgi_floor(shapes: list[tuple[int, int]]) -> dict[str, Any]:
    """Events/s for each (streams, events per stream): one event per send, then 100 per send."""
    server = subprocess.Popen(
        [sys.executable, __file__, "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    found = []
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        if not url.startswith(f"http://{HOST}:"):
            raise RuntimeError(f"the ASGI server did not start (said {url!r})")
        for streams, events in shapes:
            single = trio.run(consume, url, events, streams, 1)
            batched = trio.run(consume, url, events * 20, streams, 100)
            found.append(
                {
                    "streams": streams,
                    "events_per_stream": events,
                    "events_per_s_single": single,
                    "events_per_s_batched": batched,
                }
            )
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    from importlib.metadata import version

    return {
        "floor": "asgi",
        "shapes": found,
        "event_bytes": len(EVENT),
        "hypercorn": version("hypercorn"),
        "httpx": version("httpx"),
    }


def _shape(text: str) -> tuple[int, int]:
    streams, events = text.lower().split("x")
    return int(streams), int(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="floor", required=True)
    sub.add_parser("sqlite").add_argument("--writes", type=int, default=5000)
    asgi = sub.add_parser("asgi")
    asgi.add_argument(
        "--shapes",
        default="200x50,8x5000",
        help="STREAMSxEVENTS,... (events per stream; x20 when batched)",
    )
    sub.add_parser("serve", help="(internal) the ASGI server process")
    args = parser.parse_args()
    if args.floor == "serve":
        trio.run(serve)
        return
    out = (
        sqlite_floor(args.writes)
        if args.floor == "sqlite"
        else asgi_floor([_shape(text) for text in args.shapes.split(",")])
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
