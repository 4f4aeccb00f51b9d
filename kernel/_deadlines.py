"""Run deadlines kept as numbers, enforced by one watchdog task (docs/decisions/0046).

A Trio cancel scope costs 12-18 µs to enter and leave on a 2-core machine, and a turn with the
default finite timeouts opened three: its step's, its model call's and its tool call's. The
step's and the model call's end the run, and every run already has a scope that ends it (the
run timeout's). So a run keeps those two deadlines as floats on its :class:`RunClock`, and a
:class:`Watchdog` -- one Trio system task per kernel, asleep until the earliest deadline it
knows -- cancels the run's scope when one passes, saying which. A tool call's timeout is an
error result and the run goes on, so the call keeps a scope of its own, but one without a
deadline (cheaper), which the watchdog cancels.

Starting a step or a call writes a float; the watchdog is woken earlier only when a deadline
comes before the one it sleeps until, which the steady state of a run never does (each new
deadline of a kind is later than the last).
"""

from __future__ import annotations

import math

import trio

INF = math.inf


class RunClock:
    """The deadlines of one run's step, model call and tool call, in ``trio.current_time()``
    seconds (``INF``: none). A slot in use is busy: a strategy that makes calls of one kind
    concurrently gives the others scopes of their own (see :meth:`Watchdog`)."""

    __slots__ = ("_now", "_run_scope", "_watchdog", "fired", "model", "step", "tool", "tool_scope")

    def __init__(self, watchdog: Watchdog) -> None:
        self._watchdog = watchdog
        # The Trio run's clock, asked directly (trio.current_time() is three calls deep).
        self._now = trio.lowlevel.current_clock().current_time
        self._run_scope: trio.CancelScope | None = None
        self.step = self.model = self.tool = INF
        self.tool_scope: trio.CancelScope | None = None
        self.fired: str | None = None  # why the watchdog ended the run: step or llm timeout

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
        scope = self._run_scope
        if self.fired is None and scope is not None and (self.step <= now or self.model <= now):
            # The step's first, as the outer of two nested scopes would catch it.
            self.fired = "step_timeout" if self.step <= now else "llm_timeout"
            scope.cancel()
        return INF if self.fired is not None else min(self.step, self.model, self.tool)


class Watchdog:
    """Cancels what passed its deadline, for every watched run of one kernel. It runs while
    runs are watched, as a system task of the Trio run they are in, and stops when it wakes to
    find none."""

    def __init__(self) -> None:
        self.clocks: set[RunClock] = set()
        self.wake = INF  # when it wakes next (never later than a watched clock's deadline)
        self._sleep: trio.CancelScope | None = None
        self._running = False

    def watch(self, clock: RunClock, run_scope: trio.CancelScope) -> None:
        """Enforce ``clock``'s deadlines by cancelling ``run_scope`` (until :meth:`forget`)."""
        clock._run_scope = run_scope
        self.clocks.add(clock)
        if not self._running:
            self._running = True
            self.wake = min(self.wake, self._earliest())
            trio.lowlevel.spawn_system_task(self._serve, name="soulacy deadlines")

    def forget(self, clock: RunClock) -> None:
        clock._run_scope, clock.step, clock.model = None, INF, INF
        self.clocks.discard(clock)

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
        finally:  # the next watched run starts it again (in whichever Trio run it is)
            self._sleep, self._running, self.wake = None, False, INF
