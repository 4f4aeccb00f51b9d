"""OpenAI Agents SDK: one workload (W1, W2 durable, W3 concurrency) in this process, as JSON.

Runs in the bench venv (bench/requirements-peers.txt). The agent is an ``agents.Agent`` run by
``Runner.run`` with a custom ``agents.models.interface.Model`` subclass that answers at once
(no API key, no client), and an async ``@function_tool``. Tracing is off
(``set_tracing_disabled(True)``, ``RunConfig(tracing_disabled=True)``). W2 passes the SDK's
``SQLiteSession`` (the runner saves each turn's items as the turn ends); its connections get
``synchronous`` as given (NORMAL by default, like Soulacy; the SDK leaves SQLite's default FULL,
an fsync per commit) through a subclass that extends ``_configure_connection``.

    python bench/peers/openai_agents_w.py --workload w1 --turns 200
"""

from __future__ import annotations

import _common

_common.quiet_environment()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import sqlite3  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from typing import Any  # noqa: E402

from agents import (  # noqa: E402
    Agent,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.testing import assistant_message, function_call  # noqa: E402
from agents.usage import Usage  # noqa: E402

RUNTIME = "openai-agents"
COUNTERS = _common.Counters()
SYNCHRONOUS = "NORMAL"


def _last_tool_output(items: Any) -> str | None:
    if isinstance(items, str) or not items:
        return None
    last = items[-1]
    kind = last.get("type") if isinstance(last, dict) else getattr(last, "type", None)
    if kind != "function_call_output":
        return None
    output = last.get("output") if isinstance(last, dict) else last.output
    return str(output)


class ScriptedModel(Model):
    """A zero-latency model playing the workload's script."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        COUNTERS.model()
        t = _common.next_turn(_last_tool_output(input))
        if t >= self.turns:
            output = [assistant_message(_common.ANSWER, item_id=f"msg-{t}")]
        else:
            output = [function_call("step", {"i": t}, call_id=f"call-{t}")]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the benchmark does not stream")


class Session(SQLiteSession):
    """The SDK's SQLite session, its connections given the benchmark's synchronous pragma."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute(f"PRAGMA synchronous={SYNCHRONOUS}")


@function_tool
async def step(i: int) -> str:
    """A trivial tool."""
    COUNTERS.tool()
    return f"ok-{i}"


async def runs(
    agent: Agent[Any], count: int, turns: int, sessions: list[Session] | None
) -> list[str]:
    config = RunConfig(tracing_disabled=True)

    async def one(n: int) -> str:
        session = sessions[n] if sessions else None
        result = await Runner.run(
            agent, "go", max_turns=turns + 1, run_config=config, session=session
        )
        return str(result.final_output)

    try:
        return list(await asyncio.gather(*(one(n) for n in range(count))))
    finally:
        for session in sessions or ():
            session.close()


def build(turns: int) -> Agent[Any]:
    return Agent(name="bench", instructions=None, model=ScriptedModel(turns), tools=[step])


async def main(args: argparse.Namespace) -> dict[str, Any]:
    global SYNCHRONOUS
    SYNCHRONOUS = args.synchronous
    set_tracing_disabled(True)
    root = _common.workdir(args)
    durable = args.workload == "w2"
    warmup_seconds = None
    if not args.no_warmup:
        started = time.perf_counter()
        warm = [Session("warmup", root / "warmup.db")] if durable else None
        await runs(build(_common.WARMUP_TURNS), 1, _common.WARMUP_TURNS, warm)
        warmup_seconds = time.perf_counter() - started
    db = root / "measured.db"
    agent = build(args.turns)
    sessions = [Session("s-0", db)] if durable else None  # the schema exists before the clock
    rss_before, started = _common.begin(COUNTERS, args)
    answers = await runs(agent, args.runs, args.turns, sessions)
    seconds = _common.end(COUNTERS, args, answers, started)
    return _common.result(
        RUNTIME,
        args,
        COUNTERS,
        seconds=seconds,
        rss_before=rss_before,
        warmup_seconds=warmup_seconds,
        versions=_common.versions_of("openai-agents", "openai", "pydantic"),
        db=_common.db_bytes(db) if durable else None,
        notes="Runner.run, custom Model, tracing disabled"
        + (f"; SQLiteSession, synchronous={args.synchronous}" if durable else ""),
    )


if __name__ == "__main__":
    _common.emit(asyncio.run(main(_common.parse_args(__doc__.splitlines()[0]))))
