"""The floors under the runtime figures: raw SQLite commits/s, and SSE events/s of a bare ASGI app.

Runs in the project's venv. Each prints one JSON object.

* ``sqlite``: committed single-row INSERTs per second with raw ``sqlite3`` and Soulacy's pragmas
  (WAL, ``synchronous=NORMAL``; ``BEGIN IMMEDIATE`` … ``COMMIT`` each): no runtime persists a
  turn faster than one such commit, the floor for W2. Also the raw cost of the SQL that
  Soulacy's store commits per turn (the fence's read, two history rows and a tool record, in
  its own schema), and of the same turn without the tool record.
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


def _single_rows(path: Path, writes: int) -> float:
    """µs per committed single-row INSERT into a table without secondary indexes."""
    conn = _connect(path)
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
    count = conn.execute("SELECT count(*) FROM t").fetchone()[0]
    conn.close()
    if count != writes:
        raise AssertionError(f"{count} rows for {writes} writes")
    return elapsed / writes * 1e6


def _soulacy_turns(path: Path, writes: int, *, tool_records: bool = True) -> float:
    """µs per committed turn as Soulacy's store writes one, issued with raw sqlite3 into its
    schema (created by the store itself): the fence's read of the lease, two history rows and
    one tool record. Without ``tool_records``: the history rows only (what a turn would cost
    if the tool record were kept in the tool result's history row; see decision 0044)."""
    from soulacy.plugins.sqlite_store import SQLiteStore

    async def create() -> None:
        store = SQLiteStore(path)
        await store.open()
        await store.aclose()

    trio.run(create)
    conn = _connect(path)
    conn.execute("INSERT INTO leases (key, token, owner_id) VALUES ('conversation', 1, 'bench')")
    fence = (
        "SELECT token, owner_id, pid, host, boot, holder, acquired_at, renewed_at, expires_at"
        " FROM leases WHERE key = ?"
    )
    history = (
        "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
        " created_at, tool_call_id, tool_calls, name, is_error, principal, user_id, attempt)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    tools = (
        "INSERT OR IGNORE INTO tool_records (run_id, call_id, name, arguments, content,"
        " is_error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    started = time.perf_counter()
    for n in range(writes):
        now, call = time.time(), f"call-{n}"
        calls = json.dumps([{"id": call, "name": "step", "arguments": {"i": n}}])
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(fence, ("conversation",)).fetchone()
        conn.executemany(
            history,
            [
                ("bench", "s", "r", "assistant", "", now, None, calls, None, 0, None, None, 1),
                ("bench", "s", "r", "tool", f"ok-{n}", now, call, None, "step", 0, None, None, 1),
            ],
        )
        if tool_records:
            conn.execute(tools, ("r", call, "step", json.dumps({"i": n}), f"ok-{n}", 0, now))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed / writes * 1e6


def sqlite_floor(writes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="soulacy-floor-") as tmp:
        single = _single_rows(Path(tmp) / "raw.db", writes)
        turn = _soulacy_turns(Path(tmp) / "turns.db", writes)
        history_only = _soulacy_turns(Path(tmp) / "history.db", writes, tool_records=False)
    return {
        "floor": "sqlite",
        "writes": writes,
        "commits_per_s": 1e6 / single,
        "us_per_commit": single,
        "us_per_soulacy_turn_commit": turn,
        "us_per_soulacy_turn_commit_history_only": history_only,
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
