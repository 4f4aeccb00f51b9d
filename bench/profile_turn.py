"""Where a W1 turn goes: a cProfile breakdown, and what blocking each per-turn plugin saves.

Runs in the project's venv. Two parts, each also usable alone:

* ``--cprofile``: one W1 run (bench/peers/soulacy_w.py's kernel: the scripted zero-latency
  model, the trivial async tool, no SQLite store) of ``--turns`` turns under cProfile, after a
  warm-up run. Prints the share of the run's profiled time spent in each part of a turn
  (cumulative time of the functions named, per turn) and the top functions by own time.
  cProfile inflates the cost of every Python call, so read shares, not microseconds.
* ``--ablate``: real time, no profiler. W1 runs of ``--turns`` turns in fresh processes, with
  the default plugins and with per-turn plugins blocked one at a time (``--plugins no:NAME``;
  not ``progress``, which nothing else replaces),
  alternating, ``--rounds`` times; medians of µs/turn and what each block saves.

    python bench/profile_turn.py --cprofile --turns 2000
    python bench/profile_turn.py --ablate --turns 2000 --rounds 3
    python bench/profile_turn.py --gc --rounds 3  # time in CPython's collector, N = 200, 10,000
    python bench/profile_turn.py --json ...      # one JSON object instead of tables
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH / "peers"))

# The parts of a turn: (label, [(file suffix, function name), ...]); cumulative times summed.
PARTS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "events: each built only when someone reads its type (EventStream.wants, emit)",
        [
            ("_events.py", "emit"),
            ("_events.py", "wants"),
        ],
    ),
    (
        "participants: asked once per run, their methods called each turn",
        [
            ("_participants.py", "of"),
            ("_participants.py", "refusal"),
        ],
    ),
    (
        "compaction: ExtractiveCompactor.compact (measures every new message)",
        [
            ("compaction/_compactor.py", "compact"),
        ],
    ),
    (
        "progress: SignatureDetector.observe (hashes every tool result)",
        [
            ("progress/_detector.py", "observe"),
        ],
    ),
    (
        "costs: the costs plugin's participant (before and after each model call)",
        [
            ("costs/__init__.py", "before_model_call"),
            ("costs/__init__.py", "after_model_call"),
        ],
    ),
    (
        "budget: Engine._check_budget (the policy's turns, calls and tokens)",
        [
            ("_engine.py", "_check_budget"),
        ],
    ),
    (
        "cancel scopes: CancelScope enter+exit (the tool call's; the watchdog times the rest)",
        [
            ("_timeouts.py", "move_on_after"),
            ("_run.py", "__enter__"),
            ("_run.py", "__exit__"),
        ],
    ),
    (
        "tool checks: Tool.check_arguments + participants' before_tool_call + Engine._approve",
        [
            ("_tools.py", "check_arguments"),
            ("_hooks.py", "__call__"),  # placeholder, replaced below by the permission hook
            ("_engine.py", "_approve"),
        ],
    ),
    (
        "store: record_turn (in-memory store)",
        [
            ("_store.py", "record_turn"),
        ],
    ),
    (
        "redaction of the tool.result preview (redact_text)",
        [
            ("_redact.py", "redact_text"),
        ],
    ),
    (
        "the workload itself: scripted model + tool function",
        [
            ("scripted/__init__.py", "complete"),
        ],
    ),
]


def _kernel(folder: Path, turns: int, plugins: list[str]) -> Any:
    import _common
    import soulacy_w

    args = argparse.Namespace(
        workload="w1", durable=False, plugins=",".join(plugins), synchronous="NORMAL"
    )
    return soulacy_w.build(folder, args, turns, _common.Counters())


def cprofile_run(turns: int, top: int) -> dict[str, Any]:
    import soulacy_w
    import trio

    root = Path(tempfile.mkdtemp(prefix="soulacy-profile-"))

    async def main() -> tuple[float, pstats.Stats]:
        warm = _kernel(root / "warm", 3, [])
        await soulacy_w.runs(warm, 1, "warm")
        await warm.aclose()
        kernel = _kernel(root / "measured", turns, [])
        kernel.agent("bench")
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        answers = await soulacy_w.runs(kernel, 1, "s")
        profile.disable()
        seconds = time.perf_counter() - started
        assert answers == ["done"], answers
        await kernel.aclose()
        return seconds, pstats.Stats(profile)

    seconds, stats = trio.run(main)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in raw.values())

    def cumulative(suffix: str, name: str) -> tuple[float, int]:
        found = [
            (ct, nc)
            for (file, _, func), (_, nc, _, ct, _) in raw.items()
            if file.endswith(suffix) and func == name
        ]
        return sum(ct for ct, _ in found), sum(nc for _, nc in found)

    parts = []
    for label, functions in PARTS:
        seconds_in, calls = 0.0, 0
        for suffix, name in functions:
            if suffix == "_hooks.py":  # the tool permission hook, by its hook name
                ct = sum(
                    c
                    for (file, _, func), (_, _, _, c, _) in raw.items()
                    if func.startswith("soulacy_tool_permission")
                )
                seconds_in += ct
                continue
            ct, nc = cumulative(suffix, name)
            seconds_in += ct
            calls += nc
        parts.append(
            {
                "part": label,
                "share": seconds_in / total if total else 0.0,
                "calls_per_turn": calls / turns,
            }
        )
    own = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    functions = [
        {
            "function": f"{Path(file).parent.name}/{Path(file).name}:{line} {func}",
            "share": tt / total if total else 0.0,
            "calls_per_turn": nc / turns,
        }
        for (file, line, func), (_, nc, tt, _, _) in own
    ]
    return {
        "turns": turns,
        "profiled_us_per_turn": seconds / turns * 1e6,
        "parts": parts,
        "top_own_time": functions,
    }


VARIANTS = {
    "default": [],
    "no:compaction": ["no:compaction"],
    "no:costs": ["no:costs"],
    "no:http": ["no:http"],
    "no:approvals": ["no:approvals"],
    # (progress cannot be blocked: nobody else answers soulacy_progress_detector)
    "all four blocked": ["no:compaction", "no:costs", "no:http", "no:approvals"],
}


def ablate(turns: int, rounds: int) -> dict[str, Any]:
    script = str(BENCH / "peers" / "soulacy_w.py")
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            command = [sys.executable, script, "--workload", "w1", "--turns", str(turns)]
            if VARIANTS[name]:
                command += ["--plugins", ",".join(VARIANTS[name])]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            times[name].append(json.loads(done.stdout.strip().splitlines()[-1])["us_per_turn"])
    base = statistics.median(times["default"])
    return {
        "turns": turns,
        "rounds": rounds,
        "variants": {
            name: {
                "us_per_turn": statistics.median(values),
                "min": min(values),
                "max": max(values),
                "saves_us": base - statistics.median(values),
            }
            for name, values in times.items()
        },
    }


def gc_run(turns: int) -> dict[str, Any]:
    """One W1 run of ``turns`` turns in this process, timing CPython's cyclic collector."""
    import gc

    import soulacy_w
    import trio

    spent, count, began = [0.0, 0.0, 0.0], [0, 0, 0], [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            spent[info["generation"]] += time.perf_counter() - began[0]
            count[info["generation"]] += 1

    async def main(root: Path) -> float:
        warm = _kernel(root / "warm", 3, [])
        await soulacy_w.runs(warm, 1, "warm")
        await warm.aclose()
        kernel = _kernel(root / "measured", turns, [])
        kernel.agent("bench")
        gc.callbacks.append(timed)
        started = time.perf_counter()
        await soulacy_w.runs(kernel, 1, "s")
        seconds = time.perf_counter() - started
        gc.callbacks.remove(timed)
        await kernel.aclose()
        return seconds

    with tempfile.TemporaryDirectory(prefix="soulacy-gc-") as root:
        seconds = trio.run(main, Path(root))
    return {
        "turns": turns,
        "us_per_turn": seconds / turns * 1e6,
        "gc_us_per_turn": [t / turns * 1e6 for t in spent],
        "collections": count,
        "tracked_objects": len(gc.get_objects()),
    }


def gc_growth(sizes: list[int], rounds: int) -> dict[str, Any]:
    """``gc_run`` for each size in fresh processes, alternating, ``rounds`` times."""
    found: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for n in sizes:
            command = [sys.executable, __file__, "--gc-one", str(n)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            found[n].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {
        str(n): {
            "us_per_turn": statistics.median(r["us_per_turn"] for r in runs),
            "gc_us_per_turn": [
                statistics.median(r["gc_us_per_turn"][g] for r in runs) for g in range(3)
            ],
            "full_collections": statistics.median(r["collections"][2] for r in runs),
            "tracked_objects": statistics.median(r["tracked_objects"] for r in runs),
        }
        for n, runs in found.items()
    }


def render(data: dict[str, Any]) -> str:
    lines = []
    if "gc" in data:
        lines += [
            "CPython's cyclic collector in W1 runs (medians; fresh processes, alternating):",
            "",
            "| turns | µs/turn | in the collector, µs/turn: gen 0 / 1 / 2 | full collections"
            " | tracked objects at the end |",
            "|---|---|---|---|---|",
        ]
        for n, g in data["gc"].items():
            split = " / ".join(f"{t:,.1f}" for t in g["gc_us_per_turn"])
            lines.append(
                f"| {int(n):,} | {g['us_per_turn']:,.1f} | {split} | {g['full_collections']:g}"
                f" | {g['tracked_objects']:,.0f} |"
            )
        lines.append("")
    if "cprofile" in data:
        c = data["cprofile"]
        lines += [
            f"cProfile, one W1 run of {c['turns']:,} turns"
            f" ({c['profiled_us_per_turn']:,.0f} µs/turn under the profiler):",
            "",
            "| part of a turn | share of profiled time | calls per turn |",
            "|---|---|---|",
        ]
        lines += [
            f"| {p['part']} | {p['share']:.1%} | {p['calls_per_turn']:.2f} |" for p in c["parts"]
        ]
        lines += ["", "| function (own time) | share | calls per turn |", "|---|---|---|"]
        lines += [
            f"| `{f['function']}` | {f['share']:.1%} | {f['calls_per_turn']:.2f} |"
            for f in c["top_own_time"]
        ]
    if "ablate" in data:
        a = data["ablate"]
        lines += [
            "",
            f"Real time, W1 N = {a['turns']:,}, {a['rounds']} rounds alternating (medians):",
            "",
            "| plugins | µs/turn (min-max) | saves µs/turn |",
            "|---|---|---|",
        ]
        lines += [
            f"| {name} | {v['us_per_turn']:,.1f} ({v['min']:,.1f}-{v['max']:,.1f})"
            f" | {v['saves_us']:,.1f} |"
            for name, v in a["variants"].items()
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cprofile", action="store_true", help="the cProfile breakdown")
    parser.add_argument("--ablate", action="store_true", help="block plugins, real time")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="--ablate rounds")
    parser.add_argument("--top", type=int, default=15, help="functions listed by own time")
    parser.add_argument("--gc", action="store_true", help="time in CPython's collector")
    parser.add_argument("--gc-sizes", default="200,10000", help="--gc: run lengths")
    parser.add_argument("--gc-one", type=int, help=argparse.SUPPRESS)  # one --gc measurement
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.gc_one:
        print(json.dumps(gc_run(args.gc_one)))
        return 0
    if not (args.cprofile or args.ablate or args.gc):
        args.cprofile = args.ablate = True
    data: dict[str, Any] = {}
    if args.gc:
        data["gc"] = gc_growth([int(n) for n in args.gc_sizes.split(",")], args.rounds)
    if args.cprofile:
        data["cprofile"] = cprofile_run(args.turns, args.top)
    if args.ablate:
        data["ablate"] = ablate(args.turns, args.rounds)
    print(json.dumps(data) if args.json else render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
