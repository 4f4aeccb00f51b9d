"""Run deadlines kept as numbers, enforced by one watchdog task (docs/decisions/0046).

A Trio cancel scope costs 12-18 µs to enter and leave on a 2-core machine, and a turn with the
default finite timeouts opened three: its step's, its model call's and its tool call's. A step's
and a model call's timeout stop what the strategy is doing (a ``RunStop`` it may catch), so one
scope per tool loop serves every turn of it: a run keeps those two deadlines as floats on its
:class:`RunClock`, and a :class:`Watchdog` -- one task per kernel, asleep until the
earliest deadline it knows -- cancels the clock's ``target`` when one passes, saying which (the
target is the innermost ``Run.timeouts()`` block, else the run's own scope). A tool call's
timeout is an error result and the run goes on, so the call keeps a scope of its own, but one
without a deadline (cheaper), which the watchdog cancels.

Starting a step or a call writes a float; the watchdog is woken earlier only when a deadline
comes before the one it sleeps until, which the steady state of a run never does (each new
deadline of a kind is later than the last).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio

INF = math.inf


class RunClock:
    """The deadlines of one run's step, model call and tool call, in ``trio.current_time()``
    seconds (``INF``: none). A slot in use is busy: a strategy that makes calls of one kind
    concurrently gives the others scopes of their own (see :meth:`Watchdog`)."""

    __slots__ = (
        "_now",
        "_watchdog",
        "fired",
        "fired_at",
        "fired_for",
        "model",
        "step",
        "target",
        "tool",
        "tool_scope",
    )

    def __init__(self, watchdog: Watchdog) -> None:
        self._watchdog = watchdog
        # The Trio run's clock, asked directly (trio.current_time() is three calls deep).
        self._now = trio.lowlevel.current_clock().current_time
        # What a passing step or model deadline cancels: the innermost Run.timeouts() block,
        # else the run's own scope (None: the run is not watched).
        self.target: trio.CancelScope | None = None
        self.step = self.model = self.tool = INF
        self.tool_scope: trio.CancelScope | None = None
        self.fired: str | None = None  # why the watchdog cancelled the target: step or llm
        self.fired_at = INF
        self.fired_for: trio.CancelScope | None = None  # the target it cancelled

    def due(self, seconds: float) -> float:
        """The deadline ``seconds`` from now, the watchdog told if it is its earliest."""
        at = self._now() + seconds
        if at < self._watchdog.wake:
            self._watchdog.wake_at(at)
        return at

    def set_step(self, at: float) -> None:
        """Move the step's deadline to ``at`` (an approval's wait moves it by its length)."""
        self.step = at
        if at < self._watchdog.wake:
            self._watchdog.wake_at(at)

    def check(self, now: float) -> float:
        """Cancel what has passed ``now``; the clock's next deadline (``INF``: none)."""
        if self.tool <= now:
            self.tool = INF
            if self.tool_scope is not None:
                self.tool_scope.cancel()
        target = self.target
        if self.fired is None and target is not None and (self.step <= now or self.model <= now):
            # The step's first, as the outer of two nested scopes would catch it. What fired is
            # over: a strategy that catches the stop and goes on has no deadline left of it.
            self.fired = "step_timeout" if self.step <= now else "llm_timeout"
            self.fired_at, self.fired_for, self.step, self.model = now, target, INF, INF
            target.cancel()
        return INF if self.fired is not None else min(self.step, self.model, self.tool)

    def took(self, target: trio.CancelScope) -> tuple[str, float] | None:
        """Why and when the watchdog cancelled ``target`` (None: it did not), once: cleared,
        so that a run that goes on can be stopped again."""
        if self.fired is None or self.fired_for is not target:
            return None
        fired = (self.fired, self.fired_at)
        self.fired, self.fired_at, self.fired_for = None, INF, None
        return fired


class Watchdog:
    """Cancels what passed its deadline, for every watched run of one kernel. It runs while
    runs are watched, as a task of the kernel's nursery (of the run's own, when the kernel is
    not open), and stops when it wakes to find none."""

    def __init__(self, start: Callable[..., bool]) -> None:
        self._start = start
        self.clocks: set[RunClock] = set()
        self.wake = INF  # when it wakes next (never later than a watched clock's deadline)
        self._sleep: trio.CancelScope | None = None
        self._running = False

    def watch(self, clock: RunClock, run_scope: trio.CancelScope) -> None:
        """Enforce ``clock``'s deadlines, cancelling ``run_scope`` when no Run.timeouts() block
        is the target (until :meth:`forget`)."""
        clock.target = run_scope
        self.clocks.add(clock)
        if not self._running:
            self.wake = min(self.wake, self._earliest())
            self._running = self._start(self._serve, name="soulacy deadlines")

    def forget(self, clock: RunClock) -> None:
        clock.target, clock.step, clock.model = None, INF, INF
        self.clocks.discard(clock)
        if not self.clocks:
            # Nothing left to wake for: a task that has not run yet ends as soon as it does,
            # instead of sleeping until a deadline that no longer applies or until its nursery
            # is cancelled. (The own watchdog of a run that never blocked, in a kernel that is
            # not open: it ended with a Cancelled, a turn later, the run's frames kept.)
            self.wake = INF

    def wake_at(self, at: float) -> None:
        self.wake = at
        if self._sleep is not None:
            self._sleep.deadline = at

    def _earliest(self) -> float:
        return min((min(c.step, c.model, c.tool) for c in self.clocks), default=INF)

    async def _serve(self) -> None:
        try:
            while self.clocks or self.wake < INF:
                with trio.CancelScope(deadline=self.wake) as sleep:
                    self._sleep = sleep
                    await trio.sleep_forever()
                self._sleep = None
                now = trio.current_time()
                # Synchronous: no clock changes while the next wake is worked out.
                self.wake = min((clock.check(now) for clock in list(self.clocks)), default=INF)
                if not self.clocks:
                    break
        finally:  # the next watched run starts it again
            self._sleep, self._running, self.wake = None, False, INF
            self.clocks.clear()  # cancelled: its nursery is closing, and their runs with it
