"""Soulacy: one workload (W1 tool loop, W2 durable, W3 concurrency) in this process, as JSON.

Runs in the project's venv. The model is a ``ScriptedProvider`` with a Python function,
registered through a throwaway plugin's ``soulacy_provider_types``; the tool is an async
function given through ``soulacy_tools``. W1 and W3 block the builtin SQLite store
(``plugins=["no:sqlite_store"]``: history stays in memory); W2 keeps the default plugins, so the
SQLite store commits every turn to ``soulacy.db`` in the workspace.

    python bench/peers/soulacy_w.py --workload w1 --turns 200
    python bench/peers/soulacy_w.py --workload w2 --turns 200
    python bench/peers/soulacy_w.py --workload w3 --turns 10 --runs 1000 [--durable]

``--durable`` keeps the SQLite store in W3 too (an extra row: what concurrency costs with it).
``--plugins no:NAME,...`` blocks more plugins (to see what each costs per turn; see the docs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import _common
import trio

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.testing import Workspace, throwaway_plugin

RUNTIME = "soulacy"


def durable(args: argparse.Namespace) -> bool:
    """W2, or W3 with --durable: the builtin SQLite store stays loaded."""
    return bool(args.workload == "w2" or args.durable)


def build(folder: Path, args: argparse.Namespace, turns: int, counters: _common.Counters) -> Kernel:
    def model(request: ModelRequest, index: int) -> ModelReply:
        counters.model()
        last = request.messages[-1]
        t = _common.next_turn(last.content if last.role == "tool" else None)
        if t >= turns:
            return ModelReply(Message("assistant", _common.ANSWER), Usage(0, 1), "stop")
        call = ToolCall(f"call-{t}", "step", {"i": t})
        return ModelReply(Message("assistant", "", tool_calls=(call,)), Usage(0, 1), "tool_calls")

    async def step(i: int) -> str:
        """A trivial tool."""
        counters.tool()
        return f"ok-{i}"

    tool = Tool.from_function(step)  # built once, as the peers build theirs
    workspace = Workspace(folder)
    # Unlimited turns (the run decides) and no cap on concurrent runs (the defaults, 100 and 50
    # per principal, are a server's admission limits; no peer has one, and W3 runs 1,000).
    config = (
        "runtime:\n  default_max_turns: 0\n  max_concurrent_sessions: 0\n"
        "  max_concurrent_sessions_per_principal: 0\n"
    )
    if durable(args):
        config += f"store:\n  synchronous: {args.synchronous}\n"
    workspace.write_config(config)
    workspace.write_agent("bench", {"llm": {"provider": "zero"}, "tools": ["step"]})
    plugin = throwaway_plugin(
        "bench",
        soulacy_provider_types=lambda: [
            ProviderType(
                "zero", lambda name, config, kernel: ScriptedProvider(name, function=model)
            )
        ],
        soulacy_tools=lambda kernel, agent_id: [tool],
    )
    plugins = [] if durable(args) else ["no:sqlite_store"]
    plugins += [p for p in args.plugins.split(",") if p]  # e.g. no:compaction, to profile
    return Kernel.load(folder, plugins=plugins, extra_plugins=[plugin], autoload=False, environ={})


async def runs(kernel: Kernel, count: int, prefix: str) -> list[str]:
    answers: list[str] = [""] * count

    async def one(n: int) -> None:
        result = await kernel.run("bench", "go", session_id=f"{prefix}-{n}")
        if result.status != "completed":
            raise AssertionError(result.metadata())
        answers[n] = result.reply

    if count == 1:
        await one(0)
        return answers
    async with trio.open_nursery() as nursery:
        for n in range(count):
            nursery.start_soon(one, n)
    return answers


async def main(args: argparse.Namespace) -> dict[str, Any]:
    counters = _common.Counters()
    root = _common.workdir(args)
    warmup_seconds = None
    if not args.no_warmup:  # a separate kernel and workspace: imports and first-call paths
        warm = build(root / "warmup", args, _common.WARMUP_TURNS, counters)
        started = time.perf_counter()
        await runs(warm, 1, "warmup")
        warmup_seconds = time.perf_counter() - started
        await warm.aclose()
    folder = root / "measured"
    kernel = build(folder, args, args.turns, counters)
    # Before the clock, as the peers build their agents (and LangGraph its checkpointer tables):
    # load the agent's SOUL.yaml (cached by the kernel) and create the database.
    kernel.agent("bench")
    if durable(args):
        await kernel.store().open()  # type: ignore[attr-defined]
    rss_before, started = _common.begin(counters, args)
    answers = await runs(kernel, args.runs, "s")
    seconds = _common.end(counters, args, answers, started)
    await kernel.aclose()
    db = _common.db_bytes(folder / "soulacy.db") if durable(args) else None
    return _common.result(
        RUNTIME,
        args,
        counters,
        seconds=seconds,
        rss_before=rss_before,
        warmup_seconds=warmup_seconds,
        versions=_common.versions_of("soulacy", "trio", "attrs", "pluggy", "sqlite-utils"),
        db=db,
        notes="durable: builtin sqlite_store" if durable(args) else "no:sqlite_store",
    )


if __name__ == "__main__":
    _common.quiet_environment()
    _common.emit(trio.run(main, _common.parse_args(__doc__.splitlines()[0], durable_flag=True)))
