"""How a run that never blocks shares the Trio thread (decisions 0010 and 0053).

A run on a model and tools that never block checkpoints at most once per ``YIELD_INTERVAL``,
timed from when it last got the thread back: other tasks keep running while it runs, and a run
resumed after other runs' turns keeps the thread for an interval instead of yielding again
after a single turn (which made 1,000 concurrent runs switch tasks at every turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Kernel
from soulacy.plugins.engine import _engine
from soulacy.testing import Workspace, participant_plugin

RUNS, TURNS = 50, 400  # enough turns for several rounds of all the runs' intervals
LOOP = [{"tool": "nope", "arguments": {}}]  # an error result each turn: no tool ever blocks


class _Steps(trio.abc.Instrument):
    """Counts the times a task got the thread."""

    def __init__(self) -> None:
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1


async def test_concurrent_runs_that_never_block_take_turns_by_the_interval(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 ms: several turns of one run even on a slow machine, and less than the other 49 runs'
    # single turns take together (what made every resumed run yield again at once).
    monkeypatch.setattr(_engine, "YIELD_INTERVAL", 0.002)
    workspace.write_config("runtime:\n  no_progress_limit: 0\n")
    workspace.scripted_agent("a", LOOP, repeat=True, max_turns=TURNS)
    calls: list[str] = []  # one entry per model call, of any run

    def counted(run: Any, reply: Any, provider: str, model: str | None) -> None:
        calls.append(run.run_id)

    kernel = make_kernel(
        plugins=["no:sqlite_store"],
        extra_plugins=[participant_plugin(after_model_call=counted)],
    )
    await kernel.run("a", "warm up", session_id="warm-up")
    calls.clear()
    ticks: list[int] = []  # model calls made so far, at each time the ticker got the thread
    finished = 0

    async def one(session: str) -> None:
        nonlocal finished
        result = await kernel.run("a", "go", session_id=session)
        assert result.incomplete_reason == "max_turns", result.metadata()
        finished += 1

    async def ticker() -> None:
        while finished < RUNS:
            ticks.append(len(calls))
            await trio.lowlevel.checkpoint()

    steps = _Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            for n in range(RUNS):
                nursery.start_soon(one, f"s{n}")
            nursery.start_soon(ticker)
    finally:
        trio.lowlevel.remove_instrument(steps)
    await kernel.aclose()

    assert len(calls) == RUNS * TURNS
    # Fair: the other tasks ran again and again while the runs went on.
    assert len({n for n in ticks if 0 < n < RUNS * TURNS}) >= 3, ticks
    # Not every turn: a run that gets the thread back keeps it for its interval.
    assert steps.steps <= RUNS * TURNS / 3, (steps.steps, RUNS * TURNS)
