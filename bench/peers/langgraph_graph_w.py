"""LangGraph, hand-written graph: one workload (W1, W2 durable, W3 concurrency), as JSON.

LangGraph's fastest configuration: what a performance-minded user writes instead of the
prebuilt agent. A ``StateGraph`` of two nodes that are plain async functions -- a model node
that plays the workload's script and a tool node that calls the tool -- and a conditional edge
between them; the messages are plain dicts in a ``messages`` channel with the documented
``operator.add`` reducer. No langchain_core at all: no ``BaseChatModel``, no message classes, no
``@tool``, no ``ToolNode``. W2 compiles the same graph with the SQLite checkpointer
(``AsyncSqliteSaver`` on an aiosqlite connection, WAL, ``synchronous`` as given, NORMAL by
default like Soulacy) and invokes with ``durability="sync"``, as ``langgraph_w.py`` does.

    python bench/peers/langgraph_graph_w.py --workload w1 --turns 200
"""

from __future__ import annotations

import _common

_common.quiet_environment()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import operator  # noqa: E402
import time  # noqa: E402
from typing import Annotated, Any, TypedDict  # noqa: E402

import aiosqlite  # noqa: E402
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

RUNTIME = "langgraph-graph"
COUNTERS = _common.Counters()


class State(TypedDict):
    messages: Annotated[list[dict[str, Any]], operator.add]


async def step(i: int) -> str:
    """The workload's trivial tool."""
    COUNTERS.tool()
    return f"ok-{i}"


TOOLS = {"step": step}


def make_graph(turns: int, checkpointer: Any = None) -> Any:
    async def model(state: State) -> dict[str, Any]:
        COUNTERS.model()
        last = state["messages"][-1]
        t = _common.next_turn(last["content"] if last["role"] == "tool" else None)
        if t >= turns:
            return {"messages": [{"role": "assistant", "content": _common.ANSWER}]}
        call = {"id": f"call-{t}", "name": "step", "args": {"i": t}}
        return {"messages": [{"role": "assistant", "content": "", "tool_calls": [call]}]}

    async def tools(state: State) -> dict[str, Any]:
        calls = state["messages"][-1]["tool_calls"]
        results = [await TOOLS[c["name"]](**c["args"]) for c in calls]
        return {
            "messages": [
                {"role": "tool", "tool_call_id": c["id"], "content": r}
                for c, r in zip(calls, results, strict=True)
            ]
        }

    def route(state: State) -> str:
        return "tools" if state["messages"][-1].get("tool_calls") else END

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", tools)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


async def runs(graph: Any, count: int, turns: int, prefix: str, durable: bool) -> list[str]:
    async def one(n: int) -> str:
        config = {"configurable": {"thread_id": f"{prefix}-{n}"}, "recursion_limit": 2 * turns + 10}
        extra = {"durability": "sync"} if durable else {}
        start = {"messages": [{"role": "user", "content": "go"}]}
        state = await graph.ainvoke(start, config, **extra)
        return str(state["messages"][-1]["content"])

    return list(await asyncio.gather(*(one(n) for n in range(count))))


async def build(
    args: argparse.Namespace, turns: int, db: str | None
) -> tuple[Any, aiosqlite.Connection | None]:
    saver, conn = None, None
    if db is not None:
        conn = await aiosqlite.connect(db)
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute(f"PRAGMA synchronous={args.synchronous}")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
    return make_graph(turns, saver), conn


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
    notes = "hand-written StateGraph, plain-function nodes, dict messages"
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
            "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite", "aiosqlite"
        ),
        db=_common.db_bytes(db) if durable else None,
        notes=notes,
    )


if __name__ == "__main__":
    _common.emit(asyncio.run(main(_common.parse_args(__doc__.splitlines()[0]))))
