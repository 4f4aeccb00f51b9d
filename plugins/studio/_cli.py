"""``soulacy build SPEC.yaml``: exit 0 completed, 3 incomplete (an allowance ran out), 1 failed."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from soulacy.kernel import CliCommand, CliContext, Event

from ._build import BuildResult, build
from ._spec import load_spec

EXIT_CODES = {"completed": 0, "failed": 1, "incomplete": 3}
_SHORT = {
    "max_build_attempts": "attempts",
    "max_build_tokens": "tokens",
    "max_build_cost_usd": "cost",
    "max_build_elapsed": "elapsed",
}


def command() -> CliCommand:
    return CliCommand(
        "build",
        "generate or repair an agent with a model until it validates and its checks pass",
        _build,
        _configure,
    )


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="build spec file (YAML): id, goal, checks, limits …")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


async def _build(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    spec = load_spec(Path(args.spec))
    events = kernel.events.subscribe(buffer=math.inf)
    try:
        async with trio.open_nursery() as nursery:
            if not args.json:
                nursery.start_soon(_progress, events, ctx)
            result = await build(kernel, spec)  # the watcher ends at studio.finished
    finally:
        with trio.CancelScope(shield=True):
            await kernel.aclose()
    if args.json:
        ctx.print_json(result.to_dict())
    else:
        _summary(result, ctx)
    return EXIT_CODES[result.status]


async def _progress(events: trio.MemoryReceiveChannel[Event], ctx: CliContext) -> None:
    async for event in events:
        if event.type == "studio.attempt":
            print(f"attempt {event.data['attempt']}: {_attempt(event.data)}", file=ctx.err)
        elif event.type == "studio.finished":
            return


def _attempt(data: Mapping[str, Any]) -> str:
    checks = data["checks"]
    passed = sum(1 for c in checks if c["passed"])
    tail = f", checks {passed}/{len(checks)} passed" if checks else ""
    if data["errors"]:
        count = len(data["errors"])
        return f"{count} problem{'s' if count != 1 else ''}{tail}"
    return f"valid{tail}"


def _summary(result: BuildResult, ctx: CliContext) -> None:
    head = f"build of agent {result.agent_id!r} ({result.mode}): {result.status}"
    if result.reason:
        head += f" ({result.reason})"
    plural = "s" if result.attempts != 1 else ""
    head += f" after {result.attempts} attempt{plural}"
    ctx.print(head if result.status == "completed" else head + "; nothing was saved")
    if result.path is not None:
        ctx.print(f"saved: {result.path}" if result.changed else f"unchanged: {result.path}")
    if result.stripped:
        ctx.print(f"removed limits the model embedded: {', '.join(result.stripped)}")
    if result.errors:
        ctx.print("problems of the last attempt:")
        for error in result.errors:
            ctx.print(f"  - {error}")
    cost = "unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"
    ctx.print(
        f"tokens: {result.tokens} (input {result.input_tokens}, output {result.output_tokens})"
        f" · cost: {cost} · elapsed: {result.elapsed_s:.1f}s"
    )
    shown = []
    for name, short in _SHORT.items():
        limit = result.limits[name]
        value = limit.get("text", limit["value"])
        shown.append(f"{short} {value} ({limit['source']})")
    ctx.print("allowances: " + " · ".join(shown))
    for warning in result.warnings:
        ctx.warn(warning)
