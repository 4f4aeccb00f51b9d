"""Cost of one compaction call as the history grows, with the engine's incremental pattern.

For each history length N (100, 1,000, 10,000 messages: a system prompt, a goal, then tool
exchanges with 600-character results), a per-run compactor first sees the whole list once (the
"cold" call, which measures every message). Then, as the engine does, each round appends one
turn (an assistant tool call and its result) and compacts again; only these calls are timed.
A fresh history and compactor are built every ``--rounds`` rounds (so N stays within 20
messages of its label), ``--repeat`` times; rounds are interleaved across the sizes so that
machine noise hits all of them alike.

Two allowances: 4,000 tokens, below even the 100-message history (every call compacts), and
unbounded-by-size (every call passes through). The view is checked to fit its allowance, so a
compactor that skipped work would fail instead of winning.

    python bench/compaction.py                     # a markdown table
    python bench/compaction.py --repeat 20 --sizes 100,1000,10000,100000
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from soulacy.kernel.messages import Message, ToolCall, ToolSpec
from soulacy.plugins.compaction import ExtractiveCompactor

TOOLS = [ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {}}})]
ALLOWANCE = 4_000


def turn(t: int) -> list[Message]:
    call = ToolCall(f"call-{t}", "read", {"path": f"src/module_{t}.py"})
    text = "".join(f"{t:08d} some file contents on line {n:02d}\n" for n in range(15))
    return [
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", text, tool_call_id=call.id, name="read"),
    ]


def history(size: int) -> list[Message]:
    messages = [Message("system", "You are a careful agent."), Message("user", "Fix the build.")]
    t = 0
    while len(messages) < size:
        messages += turn(t)
        t += 1
    return messages


class Case:
    def __init__(self, size: int, allowance: int) -> None:
        self.size, self.allowance = size, allowance
        self.messages = history(size)
        self.next = len(self.messages)
        self.compactor = ExtractiveCompactor(goal=lambda: 1)
        started = time.perf_counter_ns()
        self.compactor.compact(self.messages, allowance, TOOLS)
        self.cold_us = (time.perf_counter_ns() - started) / 1e3
        self.samples: list[float] = []
        self.view_len = 0

    def round(self) -> None:
        self.messages += turn(self.next)  # the engine appends a turn ...
        self.next += 1
        started = time.perf_counter_ns()
        view = self.compactor.compact(self.messages, self.allowance, TOOLS)  # ... then compacts
        self.samples.append((time.perf_counter_ns() - started) / 1e3)
        self.view_len = len(view)

    def check(self) -> None:
        view = self.compactor.compact(self.messages, self.allowance, TOOLS)
        assert self.compactor.estimate(view, TOOLS) <= self.allowance
        assert view[1] is self.messages[1]  # the goal
        assert view[-1] is self.messages[-1]  # the newest result


def run(sizes: list[int], repeat: int, rounds: int, allowance: int) -> list[dict[str, Any]]:
    samples: dict[int, list[float]] = {size: [] for size in sizes}
    colds: dict[int, list[float]] = {size: [] for size in sizes}
    views: dict[int, int] = {}
    for _ in range(repeat):
        cases = [Case(size, allowance) for size in sizes]
        gc.collect()
        gc.freeze()  # the histories are long-lived: keep the collector from rescanning them
        for _ in range(rounds):
            for case in cases:
                case.round()
        gc.unfreeze()
        for case in cases:
            case.check()
            samples[case.size] += case.samples
            colds[case.size].append(case.cold_us)
            views[case.size] = case.view_len
    rows = []
    for size in sizes:
        ordered = sorted(samples[size])
        rows.append(
            {
                "size": size,
                "calls": len(ordered),
                "median": statistics.median(ordered),
                "p90": ordered[int(len(ordered) * 0.9)],
                "cold": statistics.median(colds[size]),
                "view": views[size],
            }
        )
    return rows


def table(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n### {title}\n")
    print(
        "| messages | timed calls | µs/call, median | µs/call, p90 | cold first call, µs |"
        " view messages |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['calls']:,} | {r['median']:.1f} | {r['p90']:.1f} |"
            f" {r['cold']:,.0f} | {r['view']:,} |"
        )
    first, last = rows[0], rows[-1]
    print(
        f"\nmedian cost ratio {last['size']:,} / {first['size']:,} messages:"
        f" {last['median'] / first['median']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=50, help="fresh histories per size")
    parser.add_argument("--rounds", type=int, default=10, help="appended turns per history")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    over = run(sizes, args.repeat, args.rounds, ALLOWANCE)
    table(f"Over the allowance ({ALLOWANCE:,} tokens): every call compacts", over)
    under = run(sizes, args.repeat, args.rounds, 10**12)
    table("Under the allowance: every call passes through", under)


if __name__ == "__main__":
    main()
