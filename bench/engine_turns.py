"""Per-turn cost of the run engine with a zero-latency scripted model and a trivial tool.

Turn t of an N-turn run returns a call to the async tool ``step(i=t)``, which returns
``"ok-<t>"``; turn N returns a text answer. The model and tool call counts are checked, so a run
that skipped work would fail instead of winning. Each N runs in a fresh process (peak RSS is
per process).

    python bench/engine_turns.py                 # N = 100, 200, 1000, 10000 -> a table
    python bench/engine_turns.py --one 200       # one run, JSON (used by the table)
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.testing import Workspace, throwaway_plugin


def build(folder: Path, turns: int, stamps: list[float], store: bool = False) -> Kernel:
    def model(request: ModelRequest, index: int) -> ModelReply:
        stamps.append(time.perf_counter())
        t = index + 1
        if t >= turns:
            return ModelReply(Message("assistant", "done"), Usage(0, 1), "stop")
        call = ToolCall(f"call-{t}", "step", {"i": t})
        return ModelReply(Message("assistant", "", tool_calls=(call,)), Usage(0, 1), "tool_calls")

    async def step(i: int) -> str:
        """A trivial tool."""
        return f"ok-{i}"

    workspace = Workspace(folder)
    workspace.write_config("runtime:\n  default_max_turns: 0\n")  # unlimited: the run decides
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
    plugins = [] if store else ["no:sqlite_store"]  # the engine alone, or with durable turns
    return Kernel.load(folder, extra_plugins=[plugin], plugins=plugins, autoload=False, environ={})


def one(turns: int, store: bool = False) -> dict[str, Any]:
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        kernel = build(Path(tmp), turns, stamps, store)

        async def run() -> Any:
            try:
                return await kernel.run("bench", "go")
            finally:
                await kernel.aclose()

        started = time.perf_counter()
        result = trio.run(run)
        elapsed = time.perf_counter() - started
    assert result.status == "completed", result.metadata()
    assert (result.llm_calls, result.tool_calls) == (turns, turns - 1), result.metadata()
    gaps = [b - a for a, b in itertools.pairwise(stamps)]

    def window(center: int) -> float:
        lo = max(0, center - 50)
        return statistics.median(gaps[lo : lo + 100]) * 1e6

    return {
        "turns": turns,
        "store": store,
        "us_per_turn": elapsed / turns * 1e6,
        "us_turn_100": window(100) if turns > 150 else None,
        "us_last_100": window(len(gaps) - 50),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def table(sizes: list[int], repeat: int, store: bool = False) -> list[dict[str, Any]]:
    rows = []
    for turns in sizes:
        runs = []
        for _ in range(repeat):
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(turns), *(["--store"] if store else [])],
                check=True,
                capture_output=True,
                text=True,
            )
            runs.append(json.loads(out.stdout))
        best = min(runs, key=lambda r: r["us_per_turn"])
        rows.append(
            {
                **best,
                "runs": repeat,
                "us_per_turn_range": [
                    round(min(r["us_per_turn"] for r in runs), 1),
                    round(max(r["us_per_turn"] for r in runs), 1),
                ],
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", type=int, help="run one N in this process and print JSON")
    parser.add_argument("--sizes", default="100,200,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", action="store_true", help="commit every turn to SQLite")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.store)))
        return
    rows = table([int(s) for s in args.sizes.split(",")], args.repeat, args.store)
    print(
        "| N | µs/turn (best of runs) | range | µs/turn near turn 100 | µs/turn, last 100 |"
        " peak RSS MB |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        near = f"{r['us_turn_100']:.1f}" if r["us_turn_100"] else "-"
        print(
            f"| {r['turns']} | {r['us_per_turn']:.1f} | {r['us_per_turn_range']} | {near} |"
            f" {r['us_last_100']:.1f} | {r['peak_rss_mb']:.1f} |"
        )
    big = next((r for r in rows if r["turns"] >= 10000), None)
    if big and big["us_turn_100"]:
        print(
            f"\nturn 10,000 / turn 100 cost ratio (same run): "
            f"{big['us_last_100'] / big['us_turn_100']:.2f}"
        )


if __name__ == "__main__":
    main()
