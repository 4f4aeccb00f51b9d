"""What OpenTelemetry costs a turn: bench/engine_turns.py's W1 run with the otel contrib plugin.

One run of N turns (default 200) on a zero-latency scripted model and a trivial async tool, as
``engine_turns.py --one N`` (memory store), in three modes:

* ``off`` — the plugin is not loaded;
* ``metrics`` — loaded, no span exporter: metrics only (what ``exporter: none`` costs);
* ``on`` — loaded, spans to the SDK's in-memory exporter through its ``BatchSpanProcessor``
  (the processor the plugin always uses), and metrics.

The span count is checked in ``on`` mode (1 run span + N model calls + N - 1 tool calls), so a
run that skipped its spans would fail instead of winning. The modes alternate, each run in a
fresh process, for ``--rounds`` rounds; the medians and the best of the rounds (the least
disturbed by other work on the machine) are printed as JSON.

    python bench/otel_turns.py                       # 5 rounds of off / metrics / on, N = 200
    python bench/otel_turns.py --one 200 --mode on   # one run, JSON (used by the rounds)
    python bench/otel_turns.py --steady --turns 1000 # the modes alternating in one process
"""

from __future__ import annotations

import argparse
import json
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

MODES = ("off", "metrics", "on")


def build(folder: Path, turns: int, mode: str) -> Kernel:
    def model(request: ModelRequest, index: int) -> ModelReply:
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
    plugins = ["no:sqlite_store"] + ([] if mode == "off" else ["soulacy.contrib.otel"])
    return Kernel.load(folder, extra_plugins=[plugin], plugins=plugins, autoload=False, environ={})


def one(turns: int, mode: str) -> dict[str, Any]:
    exporter: Any = None
    with tempfile.TemporaryDirectory() as tmp:
        kernel = build(Path(tmp), turns, mode)
        if mode != "off":
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            from soulacy.contrib.otel import start_telemetry

            exporter = InMemorySpanExporter() if mode == "on" else None
            telemetry = start_telemetry(
                kernel, span_exporters=[exporter] if exporter else [], metric_readers=[]
            )

        async def run() -> Any:
            try:
                return await kernel.run("bench", "go")
            finally:
                if exporter is not None:
                    telemetry.force_flush()
                    spans = len(exporter.get_finished_spans())
                    assert spans == 2 * turns, spans  # the run, N model calls, N - 1 tool calls
                await kernel.aclose()

        started = time.perf_counter()
        result = trio.run(run)
        elapsed = time.perf_counter() - started
    assert result.status == "completed", result.metadata()
    assert (result.llm_calls, result.tool_calls) == (turns, turns - 1), result.metadata()
    return {"turns": turns, "mode": mode, "us_per_turn": elapsed / turns * 1e6}


def steady(turns: int, count: int) -> dict[str, Any]:
    """The marginal cost of a turn: the modes alternate in this one process (warmed up by a
    first round that is not kept), timing ``kernel.run`` alone (no start-up, no close)."""
    runs: dict[str, list[float]] = {mode: [] for mode in MODES}
    for index in range(count + 1):
        for mode in MODES:
            with tempfile.TemporaryDirectory() as tmp:
                kernel = build(Path(tmp), turns, mode)
                if mode != "off":
                    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                        InMemorySpanExporter,
                    )

                    from soulacy.contrib.otel import start_telemetry

                    exporters = [InMemorySpanExporter()] if mode == "on" else []
                    start_telemetry(kernel, span_exporters=exporters, metric_readers=[])

                async def run(kernel: Kernel = kernel) -> float:
                    started = time.perf_counter()
                    try:
                        result = await kernel.run("bench", "go")
                        assert result.llm_calls == turns, result.metadata()
                        return time.perf_counter() - started
                    finally:
                        await kernel.aclose()

                elapsed = trio.run(run)
            if index:
                runs[mode].append(elapsed / turns * 1e6)
    medians = {mode: statistics.median(values) for mode, values in runs.items()}
    return {
        "turns": turns,
        "rounds": count,
        "in_process": True,
        "us_per_turn_median": {m: round(v, 1) for m, v in medians.items()},
        "overhead_us_per_turn_median": {
            "metrics": round(medians["metrics"] - medians["off"], 1),
            "on": round(medians["on"] - medians["off"], 1),
        },
    }


def rounds(turns: int, count: int) -> dict[str, Any]:
    runs: dict[str, list[float]] = {mode: [] for mode in MODES}
    for _ in range(count):
        for mode in MODES:  # alternating, each in a fresh process
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(turns), "--mode", mode],
                check=True,
                capture_output=True,
                text=True,
            )
            runs[mode].append(json.loads(out.stdout)["us_per_turn"])
    medians = {mode: statistics.median(values) for mode, values in runs.items()}
    best = {mode: min(values) for mode, values in runs.items()}
    return {
        "turns": turns,
        "rounds": count,
        "us_per_turn_median": {m: round(v, 1) for m, v in medians.items()},
        "us_per_turn_best": {m: round(v, 1) for m, v in best.items()},
        "us_per_turn_runs": {m: [round(v, 1) for v in values] for m, values in runs.items()},
        "overhead_us_per_turn_median": {
            "metrics": round(medians["metrics"] - medians["off"], 1),
            "on": round(medians["on"] - medians["off"], 1),
        },
        "overhead_us_per_turn_best": {
            "metrics": round(best["metrics"] - best["off"], 1),
            "on": round(best["on"] - best["off"], 1),
        },
        "ratio_on_to_off_median": round(medians["on"] / medians["off"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", type=int, help="run one N in this process and print JSON")
    parser.add_argument("--mode", choices=MODES, default="on")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--steady", action="store_true", help="alternate the modes in one process instead"
    )
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.mode)))
        return
    if args.steady:
        print(json.dumps(steady(args.turns, args.rounds), indent=2))
        return
    print(json.dumps(rounds(args.turns, args.rounds), indent=2))


if __name__ == "__main__":
    main()
