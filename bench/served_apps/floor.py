"""The served path's floor: a bare hypercorn + Trio app doing a served chat's work, no runtime.

    python bench/served_apps/floor.py --db chats.db            # raw sqlite3
    python bench/served_apps/floor.py --dsn postgresql://...   # raw psycopg

It accepts the request ``soulacy serve`` accepts (``POST /api/v1/chat/stream``, JSON
``{"agent_id", "text", "session_id"}``), commits the rows a Soulacy chat of one tool call and an
answer commits (a lease taken and released, a run started and finished, four history rows, a
tool record, a proof, the stream's six events kept for a reconnect) and writes the six SSE
events Soulacy writes (``run``, ``run.limits``, ``tool.call``, ``tool.result``, ``delta``,
``result``; ids 1..6, payloads of the same shape). No framework, no kernel, no pool: one
connection used from the event loop itself (a blocking call), three commits a chat -- before
the model is asked (lease, run, the user's message), after the tool (the call and its result)
and at the end (the answer, the run's status, the proof, the events, the lease released) --
the fewest a chat can make and still survive a crash between model and tool. What this costs
in server CPU is what any runtime must pay on this server stack; the rest is the runtime's.

Prints ``Running on http://127.0.0.1:<port>`` on stderr once it listens (as ``soulacy serve``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sqlite3
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Statement = tuple[str, tuple[Any, ...]]  # SQL with ? marks, and its arguments

SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (key TEXT PRIMARY KEY, token INTEGER NOT NULL, owner_id TEXT,
    holder TEXT, acquired_at REAL, expires_at REAL);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, agent_id TEXT, session_id TEXT,
    status TEXT, metadata TEXT, started_at REAL, finished_at REAL, lease_key TEXT,
    lease_token INTEGER);
CREATE TABLE IF NOT EXISTS history (id {serial}, session_id TEXT, agent_id TEXT,
    run_id TEXT, role TEXT, content TEXT, created_at REAL, tool_call_id TEXT, tool_calls TEXT,
    name TEXT, record_arguments TEXT);
CREATE INDEX IF NOT EXISTS history_by_session ON history (session_id, agent_id, id);
CREATE TABLE IF NOT EXISTS proofs (run_id TEXT PRIMARY KEY, sha256 TEXT, body TEXT,
    created_at REAL);
CREATE TABLE IF NOT EXISTS run_events (run_id TEXT, id INTEGER, name TEXT, data TEXT,
    created_at REAL, PRIMARY KEY (run_id, id));
"""

# run.limits: the same keys as Soulacy's event (what a client is told of the run's limits)
LIMITS = {
    name: {"value": value, "unlimited": value == "unlimited", "source": "default"}
    for name, value in (
        ("max_turns", 256),
        ("max_tokens", "unlimited"),
        ("max_llm_calls", "unlimited"),
        ("max_output_tokens", 16384),
        ("reasoning_max_steps", 256),
        ("no_progress_limit", 20),
        ("run_timeout", 172800.0),
        ("llm_timeout", 300.0),
        ("step_timeout", 600.0),
        ("tool_timeout", 120.0),
        ("reasoning_step_timeout", 600.0),
        ("reasoning_total_timeout", 172800.0),
        ("context_window", "unlimited"),
        ("max_tool_result_chars", 100000),
        ("http_timeout", 172860.0),
        ("max_build_tokens", "unlimited"),
        ("max_build_cost_usd", "unlimited"),
        ("max_build_attempts", 32),
        ("max_build_elapsed", 172800.0),
    )
}
HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class Rows:
    """The chat's rows, committed with one raw connection (sqlite3 or psycopg)."""

    def __init__(self, db: str | None, dsn: str | None) -> None:
        if dsn:
            import psycopg

            self.conn: Any = psycopg.connect(dsn, autocommit=True)
            self.mark, self.begin = "%s", "BEGIN"
            serial = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
            for statement in SCHEMA.format(serial=serial).split(";"):
                if statement.strip():
                    self.conn.execute(statement)
            self.upsert = " ON CONFLICT (key) DO UPDATE SET token = leases.token + 1,"
        else:
            self.conn = sqlite3.connect(db or "floor.db", isolation_level=None)
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.executescript(SCHEMA.format(serial="INTEGER PRIMARY KEY"))
            self.mark, self.begin = "?", "BEGIN IMMEDIATE"
            self.upsert = " ON CONFLICT (key) DO UPDATE SET token = leases.token + 1,"

    def transaction(self, statements: list[Statement]) -> None:
        """One committed transaction of ``statements`` (``?`` marks, replaced for psycopg)."""
        self.conn.execute(self.begin)
        try:
            for sql, args in statements:
                self.conn.execute(sql.replace("?", self.mark), args)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")


def event(number: int, name: str, data: dict[str, Any]) -> bytes:
    return f"id: {number}\nevent: {name}\ndata: {json.dumps(data)}\n\n".encode()


def history(run: str, body: dict[str, Any], role: str, content: str, **extra: Any) -> Statement:
    return (
        "INSERT INTO history (session_id, agent_id, run_id, role, content, created_at,"
        " tool_call_id, tool_calls, name, record_arguments) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            body["session_id"],
            body["agent_id"],
            run,
            role,
            content,
            time.time(),
            extra.get("tool_call_id"),
            extra.get("tool_calls"),
            extra.get("name"),
            extra.get("record_arguments"),
        ),
    )


async def chat(rows: Rows, body: dict[str, Any], send: Send) -> None:
    run, session, agent = uuid.uuid4().hex, body["session_id"], body["agent_id"]
    key = json.dumps(["conversation", agent, session])
    started = time.time()
    sent: list[tuple[str, dict[str, Any]]] = []

    async def emit(name: str, data: dict[str, Any]) -> None:
        sent.append((name, data))
        chunk = event(len(sent), name, data)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})

    rows.transaction(
        [
            (
                "INSERT INTO leases (key, token, owner_id, holder, acquired_at, expires_at)"
                " VALUES (?, 1, ?, ?, ?, ?)" + rows.upsert + " owner_id = excluded.owner_id,"
                " holder = excluded.holder, acquired_at = excluded.acquired_at,"
                " expires_at = excluded.expires_at",
                (key, "floor", run, started, started + 30),
            ),
            (
                "INSERT INTO runs (run_id, agent_id, session_id, status, started_at, lease_key,"
                " lease_token) VALUES (?, ?, ?, 'running', ?, ?, 1)",
                (run, agent, session, started, key),
            ),
            history(run, body, "user", body["text"]),
        ]
    )
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await emit("run", {"run_id": run, "session_id": session, "agent_id": agent})
    await emit("run.limits", {"agent_id": agent, **LIMITS})
    # the model's first turn: a call of the tool step(i=1); the tool answers "ok-1"
    call: dict[str, Any] = {"id": "call_0_0", "name": "step", "arguments": {"i": 1}}
    await emit("tool.call", {"turn": 1, **call, "replayed": False})
    result = f"ok-{call['arguments']['i']}"
    rows.transaction(
        [
            history(run, body, "assistant", "", tool_calls=json.dumps([call])),
            history(
                run,
                body,
                "tool",
                result,
                tool_call_id=call["id"],
                name="step",
                record_arguments=json.dumps(call["arguments"]),
            ),
        ]
    )
    await emit(
        "tool.result",
        {"id": call["id"], "name": "step", "is_error": False, "replayed": False,
         "verdict": "progress", "chars": len(result), "preview": result},
    )  # fmt: skip
    # the model's second turn: the answer
    reply = "done"
    await emit("delta", {"text": reply})
    finished = time.time()
    metadata = {"run_id": run, "session_id": session, "agent_id": agent, "status": "completed",
                "turns": 2, "llm_calls": 2, "tool_calls": 1, "started_at": started,
                "finished_at": finished}  # fmt: skip
    proof = json.dumps({"run_id": run, "calls": [call], "results": [result], "reply": reply})
    digest = hashlib.sha256(proof.encode()).hexdigest()
    final = {"reply": reply, "run_id": run, "session_id": session, "status": "completed",
             "metadata": {**metadata, "proof": {"sha256": digest, "receipts": 1}}}  # fmt: skip
    sent.append(("result", final))
    rows.transaction(
        [
            history(run, body, "assistant", reply),
            (
                "UPDATE runs SET status = 'completed', metadata = ?, finished_at = ?"
                " WHERE run_id = ?",
                (json.dumps(metadata), finished, run),
            ),
            (
                "INSERT INTO proofs (run_id, sha256, body, created_at) VALUES (?, ?, ?, ?)",
                (run, digest, proof, finished),
            ),
            *[
                (
                    "INSERT INTO run_events (run_id, id, name, data, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (run, number, name, json.dumps(data), finished),
                )
                for number, (name, data) in enumerate(sent, 1)
            ],
            (
                "UPDATE leases SET owner_id = NULL, holder = '', expires_at = NULL WHERE key = ?",
                (key,),
            ),
        ]
    )
    chunk = event(len(sent), "result", final)
    await send({"type": "http.response.body", "body": chunk, "more_body": False})


async def app(rows: Rows, scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    if scope["path"] == "/api/v1/health":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await chat(rows, json.loads(body), send)


async def main(args: argparse.Namespace) -> None:
    rows = Rows(args.db, args.dsn)
    config = Config()
    config.bind = [f"127.0.0.1:{args.port}"]
    config.accesslog = None
    config.loglevel = "WARNING"  # its own "Running on" line names the port asked for
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:

        async def stopped() -> None:
            async for _ in signals:
                return

        async with trio.open_nursery() as nursery:
            served = partial(serve, partial(app, rows), config, shutdown_trigger=stopped)
            binds = await nursery.start(served)
            print(f"Running on {binds[0]}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="SQLite file (default floor.db)")
    parser.add_argument("--dsn", help="a PostgreSQL DSN: raw psycopg instead of sqlite3")
    parser.add_argument("--port", type=int, default=0)
    trio.run(main, parser.parse_args())
