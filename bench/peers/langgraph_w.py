"""LangGraph: one workload (W1 tool loop, W2 durable, W3 concurrency) in this process, as JSON.

Runs in the bench venv (bench/requirements-peers.txt). The agent is LangGraph's prebuilt ReAct
loop, ``langgraph.prebuilt.create_react_agent`` (a model node and a ``ToolNode``), with a
scripted ``BaseChatModel`` (``_agenerate`` answers at once; ``bind_tools`` binds the tool schemas
the way a provider's chat model does) and an async ``@tool``. W2 compiles it with the SQLite
checkpointer of ``langgraph-checkpoint-sqlite`` (``AsyncSqliteSaver`` on an aiosqlite connection,
WAL, ``synchronous`` as given, NORMAL by default like Soulacy) and invokes with
``durability="sync"``: every step's checkpoint is written before the next step starts. No
LangSmith: its environment variables are removed and tracing is set to false.

    python bench/peers/langgraph_w.py --workload w1 --turns 200
"""

from __future__ import annotations

import _common

_common.quiet_environment()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import aiosqlite  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402

RUNTIME = "langgraph"
COUNTERS = _common.Counters()


class ScriptedChat(BaseChatModel):
    """A zero-latency chat model playing the workload's script."""

    turns: int

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _reply(self, messages: list[BaseMessage]) -> ChatResult:
        COUNTERS.model()
        last = messages[-1]
        t = _common.next_turn(str(last.content) if isinstance(last, ToolMessage) else None)
        if t >= self.turns:
            message = AIMessage(content=_common.ANSWER)
        else:
            call = {"name": "step", "args": {"i": t}, "id": f"call-{t}", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        return self._reply(messages)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any
    ) -> ChatResult:
        return self._reply(messages)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


@tool
async def step(i: int) -> str:
    """A trivial tool."""
    COUNTERS.tool()
    return f"ok-{i}"


async def runs(graph: Any, count: int, turns: int, prefix: str, durable: bool) -> list[str]:
    async def one(n: int) -> str:
        config = {"configurable": {"thread_id": f"{prefix}-{n}"}, "recursion_limit": 2 * turns + 10}
        extra = {"durability": "sync"} if durable else {}
        state = await graph.ainvoke({"messages": [("user", "go")]}, config, **extra)
        return str(state["messages"][-1].content)

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def build(
    args: argparse.Namespace, turns: int, db: str | None
) -> tuple[Any, aiosqlite.Connection | None]:
    model = ScriptedChat(turns=turns)
    saver, conn = None, None
    if db is not None:
        conn = await aiosqlite.connect(db)
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute(f"PRAGMA synchronous={args.synchronous}")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
    with warnings.catch_warnings():  # deprecated for langchain's create_agent (see the docs)
        warnings.simplefilter("ignore")
        return create_react_agent(model, [step], checkpointer=saver), conn


async def main(args: argparse.Namespace) -> dict[str, Any]:
    root = _common.workdir(args)
    durable = args.workload == "w2"
    conns: list[aiosqlite.Connection] = []  # closed even on failure (their threads block exit)
    try:
        warmup_seconds = None
        if not args.no_warmup:
            warm_db = str(root / "warmup.db") if durable else None
            warm, conn = await build(args, _common.WARMUP_TURNS, warm_db)
            conns += [conn] if conn else []
            started = time.perf_counter()
            await runs(warm, 1, _common.WARMUP_TURNS, "warmup", durable)
            warmup_seconds = time.perf_counter() - started
        db = root / "measured.db"
        graph, conn = await build(args, args.turns, str(db) if durable else None)
        conns += [conn] if conn else []
        rss_before, started = _common.begin(COUNTERS, args)
        answers = await runs(graph, args.runs, args.turns, "s", durable)
        seconds = _common.end(COUNTERS, args, answers, started)
    finally:
        for conn in conns:
            await conn.close()
    notes = "create_react_agent"
    if durable:
        notes += f"; AsyncSqliteSaver, durability=sync, synchronous={args.synchronous}"
    return _common.result(
        RUNTIME,
        args,
        COUNTERS,
        seconds=seconds,
        rss_before=rss_before,
        warmup_seconds=warmup_seconds,
        versions=_common.versions_of(
            "langgraph",
            "langgraph-prebuilt",
            "langgraph-checkpoint",
            "langgraph-checkpoint-sqlite",
            "langchain-core",
            "aiosqlite",
        ),
        db=_common.db_bytes(db) if durable else None,
        notes=notes,
    )


if __name__ == "__main__":
    _common.emit(asyncio.run(main(_common.parse_args(__doc__.splitlines()[0]))))
