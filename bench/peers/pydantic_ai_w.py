"""Pydantic AI: one workload (W1, W2 durable, W3 concurrency) in this process, as JSON.

Runs in the bench venv (bench/requirements-peers.txt), with ``pydantic-ai-slim`` (no logfire;
agents are not instrumented). The model is ``pydantic_ai.models.function.FunctionModel`` with an
async function; the tool is an async plain function (``Tool(step, takes_ctx=False)``). The
request limit is lifted (``UsageLimits(request_limit=None)``; the default is 50).

Pydantic AI has no SQLite persistence built in (its ``ConversationStore`` ships only an
in-memory implementation, and saves when a run ends). W2 therefore drives the run node by node
with ``agent.iter()`` and, after every node, appends the messages the run gained to SQLite, one
row per message serialised with ``ModelMessagesTypeAdapter`` (the documented way to store
message history), committed in one transaction per node on a plain ``sqlite3`` connection (WAL,
``synchronous`` as given, NORMAL by default, like Soulacy).

    python bench/peers/pydantic_ai_w.py --workload w1 --turns 200
"""

from __future__ import annotations

import _common

_common.quiet_environment()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import sqlite3  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from pydantic_ai import Agent, Tool  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

RUNTIME = "pydantic-ai"
COUNTERS = _common.Counters()
LIMITS = UsageLimits(request_limit=None)


def scripted(turns: int) -> FunctionModel:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        COUNTERS.model()
        last = messages[-1]
        part = last.parts[-1] if isinstance(last, ModelRequest) and last.parts else None
        t = _common.next_turn(str(part.content) if isinstance(part, ToolReturnPart) else None)
        if t >= turns:
            return ModelResponse(parts=[TextPart(_common.ANSWER)])
        return ModelResponse(parts=[ToolCallPart("step", {"i": t}, tool_call_id=f"call-{t}")])

    return FunctionModel(model)


async def step(i: int) -> str:
    """A trivial tool."""
    COUNTERS.tool()
    return f"ok-{i}"


def build(turns: int) -> Agent[None, str]:
    return Agent(scripted(turns), tools=[Tool(step, takes_ctx=False)])


def open_db(path: str, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS messages"
        " (id INTEGER PRIMARY KEY, session TEXT NOT NULL, message BLOB NOT NULL)"
    )
    return conn


async def durable_run(agent: Agent[None, str], session: str, conn: sqlite3.Connection) -> str:
    saved = 0
    async with agent.iter("go", usage_limits=LIMITS) as run:
        async for _node in run:
            messages = run.all_messages()
            if len(messages) > saved:
                rows = [
                    (session, ModelMessagesTypeAdapter.dump_json([m])) for m in messages[saved:]
                ]
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO messages (session, message) VALUES (?, ?)", rows)
                conn.execute("COMMIT")
                saved = len(messages)
    assert run.result is not None
    return str(run.result.output)


async def runs(
    agent: Agent[None, str], count: int, prefix: str, conn: sqlite3.Connection | None
) -> list[str]:
    async def one(n: int) -> str:
        if conn is not None:
            return await durable_run(agent, f"{prefix}-{n}", conn)
        result = await agent.run("go", usage_limits=LIMITS)
        return str(result.output)

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    root = _common.workdir(args)
    durable = args.workload == "w2"
    warmup_seconds = None
    if not args.no_warmup:
        warm = open_db(str(root / "warmup.db"), args.synchronous) if durable else None
        started = time.perf_counter()
        await runs(build(_common.WARMUP_TURNS), 1, "warmup", warm)
        warmup_seconds = time.perf_counter() - started
        if warm is not None:
            warm.close()
    db = root / "measured.db"
    conn = open_db(str(db), args.synchronous) if durable else None
    agent = build(args.turns)
    rss_before, started = _common.begin(COUNTERS, args)
    answers = await runs(agent, args.runs, "s", conn)
    seconds = _common.end(COUNTERS, args, answers, started)
    if conn is not None:
        conn.close()
    return _common.result(
        RUNTIME,
        args,
        COUNTERS,
        seconds=seconds,
        rss_before=rss_before,
        warmup_seconds=warmup_seconds,
        versions=_common.versions_of("pydantic-ai-slim", "pydantic-graph", "pydantic"),
        db=_common.db_bytes(db) if durable else None,
        notes="Agent + FunctionModel, not instrumented"
        + (
            f"; agent.iter + ModelMessagesTypeAdapter rows per node, synchronous={args.synchronous}"
            if durable
            else ""
        ),
    )


if __name__ == "__main__":
    _common.emit(asyncio.run(main(_common.parse_args(__doc__.splitlines()[0]))))
