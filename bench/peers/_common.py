"""What every runtime's workload script shares: arguments, the script of turns, checks, output.

Standard library only: it is imported by the Soulacy script (project venv) and by the peers'
scripts (the bench venv). Each script runs ONE workload in a fresh process and prints one JSON
object on stdout.

The workload: turn t of an N-turn run returns a call to the async tool ``step(i=t)``, which
returns ``"ok-<t>"``; turn N returns the text ``"done"``. The model decides t from the last
message it is sent (the previous tool result), so concurrent runs need no shared state and the
model costs O(1) per turn. Model and tool calls are counted and checked: a runtime that skipped
work fails instead of winning.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ANSWER = "done"
WARMUP_TURNS = 3


def parse_args(description: str, durable_flag: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workload", choices=["w1", "w2", "w3"], required=True)
    parser.add_argument("--turns", type=int, default=200, help="turns per run (N)")
    parser.add_argument("--runs", type=int, default=1, help="concurrent runs (W3)")
    parser.add_argument("--dir", help="folder for databases (default: a temporary folder)")
    parser.add_argument(
        "--synchronous",
        choices=["NORMAL", "FULL"],
        default="NORMAL",
        help="SQLite synchronous pragma for W2 (all runtimes are given the same)",
    )
    parser.add_argument("--no-warmup", action="store_true", help="skip the 3-turn warm-up run")
    if durable_flag:  # Soulacy only
        parser.add_argument("--durable", action="store_true", help="W3 with the SQLite store")
        parser.add_argument("--plugins", default="", help="more -p values, comma-separated")
    args = parser.parse_args()
    if args.turns < 2:
        parser.error("--turns must be at least 2 (N-1 tool turns and a text answer)")
    if args.workload != "w3":
        args.runs = 1
    return args


def next_turn(last_tool_result: str | None) -> int:
    """The turn number t of this model call, from the tool result just before it (or none)."""
    if last_tool_result is None:
        return 1
    if not last_tool_result.startswith("ok-"):
        raise AssertionError(f"unexpected last message: {last_tool_result!r}")
    return int(last_tool_result[3:]) + 1


class Counters:
    """Model and tool calls actually made, and a timestamp per model call (for steady cost)."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.tool_calls = 0
        self.stamps: list[float] | None = None  # only recorded for single runs (W1, W2)
        # CPU seconds of the measured part (this process): on a shared machine the wall time
        # grows with the other processes' load, the CPU time much less.
        self.cpu_started = 0.0
        self.cpu_seconds: float | None = None

    def model(self) -> None:
        self.model_calls += 1
        if self.stamps is not None:
            self.stamps.append(time.perf_counter())

    def tool(self) -> None:
        self.tool_calls += 1

    def reset(self, stamps: bool) -> None:
        self.model_calls = self.tool_calls = 0
        self.stamps = [] if stamps else None


def rss_mb() -> float:
    """Current resident set size (VmRSS), MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def db_bytes(*paths: Path) -> int:
    """Bytes of SQLite files and their -wal files (what the run left on disk)."""
    total = 0
    for path in paths:
        for candidate in (path, Path(f"{path}-wal")):
            if candidate.exists():
                total += candidate.stat().st_size
    return total


def steady_us(stamps: Sequence[float]) -> float | None:
    """Median gap between consecutive model calls (µs): the per-turn cost without start-up."""
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return statistics.median(gaps) * 1e6 if gaps else None


def window_us(stamps: Sequence[float], start: int | None) -> float | None:
    """Median gap (µs) over 100 turns from ``start`` (None: the last 100); None if too short."""
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    if len(gaps) < 250:
        return None
    chosen = gaps[-100:] if start is None else gaps[start : start + 100]
    return statistics.median(chosen) * 1e6


def check(counters: Counters, args: argparse.Namespace, answers: Sequence[str]) -> None:
    want_model, want_tool = args.runs * args.turns, args.runs * (args.turns - 1)
    got = (counters.model_calls, counters.tool_calls)
    if got != (want_model, want_tool):
        raise AssertionError(f"model/tool calls {got}, expected {(want_model, want_tool)}")
    wrong = [a for a in answers if a != ANSWER]
    if len(answers) != args.runs or wrong:
        raise AssertionError(f"{len(answers)} answers for {args.runs} runs; wrong: {wrong[:3]}")


def result(
    runtime: str,
    args: argparse.Namespace,
    counters: Counters,
    *,
    seconds: float,
    rss_before: float,
    warmup_seconds: float | None,
    versions: dict[str, str],
    db: int | None = None,
    notes: str = "",
) -> dict[str, Any]:
    turns_total = args.runs * args.turns
    out: dict[str, Any] = {
        "runtime": runtime,
        "workload": args.workload,
        "turns": args.turns,
        "runs": args.runs,
        "seconds": seconds,
        "us_per_turn": seconds / turns_total * 1e6,
        "cpu_seconds": counters.cpu_seconds,
        "cpu_us_per_turn": (
            None if counters.cpu_seconds is None else counters.cpu_seconds / turns_total * 1e6
        ),
        "steady_us_per_turn": steady_us(counters.stamps) if counters.stamps else None,
        # The same run early and late (runs of 250+ turns): does a turn cost more as it grows?
        "steady_turns_50_150_us": window_us(counters.stamps or [], 50),
        "steady_last_100_us": window_us(counters.stamps or [], None),
        "model_calls": counters.model_calls,
        "tool_calls": counters.tool_calls,
        "rss_before_mb": rss_before,
        "peak_rss_mb": peak_rss_mb(),
        "rss_growth_mb": peak_rss_mb() - rss_before,
        # Per run (W3): what each concurrent run costs in memory, for a budget stated in KB.
        "rss_growth_kb_per_run": (peak_rss_mb() - rss_before) * 1024 / args.runs,
        "rss_after_mb": rss_mb(),  # what stays once the runs have finished
        "warmup_seconds": warmup_seconds,
        "python": sys.version.split()[0],
        "versions": versions,
        "notes": notes,
    }
    if db is not None:
        out["db_bytes"] = db
        out["db_bytes_per_turn"] = db / turns_total
    return out


def emit(out: dict[str, Any]) -> None:
    print(json.dumps(out))


def versions_of(*names: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def begin(counters: Counters, args: argparse.Namespace) -> tuple[float, float]:
    """Start the measured part: reset the counters; returns (RSS before in MB, start time)."""
    gc.collect()
    counters.reset(stamps=args.runs == 1)
    counters.cpu_started = time.process_time()
    return rss_mb(), time.perf_counter()


def end(
    counters: Counters, args: argparse.Namespace, answers: Sequence[str], started: float
) -> float:
    """End the measured part: check the work that was done; returns the seconds it took."""
    seconds = time.perf_counter() - started
    counters.cpu_seconds = time.process_time() - counters.cpu_started
    check(counters, args, answers)
    return seconds


def workdir(args: argparse.Namespace) -> Path:
    """The folder for this process's files (a fresh temporary folder unless --dir)."""
    if args.dir:
        path = Path(args.dir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="soulacy-bench-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def quiet_environment() -> None:
    """No telemetry, whatever the caller's environment says (the runner also strips it)."""
    for key in list(os.environ):
        if key.startswith(("LANGCHAIN_", "LANGSMITH_", "LOGFIRE_", "OTEL_")) or key in (
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
        ):
            del os.environ[key]
    os.environ["LANGSMITH_TRACING"] = "false"
    os.environ["LANGCHAIN_TRACING_V2"] = "false"
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
