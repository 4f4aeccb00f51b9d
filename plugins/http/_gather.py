"""A busy stream waits for what a fast run has ready, counted in scheduler turns, woken once.

A stream that gathers (decision 0040) used to take a Trio checkpoint at every scheduler turn
to see whether the run appended more: one more task step for every event of a fast run, as
much again as the run's own step. Here Trio's ``before_io_wait`` instrument hook, called
once per turn, judges every waiting stream instead, and sets a stream's event only when its
wait ends: the stream wakes once per write (decision 0043). The rule is 0040's, turn for turn.
"""

from __future__ import annotations

import trio

from ._runlog import RunLog

GATHER_TURNS = 32  # scheduler turns a busy stream waits for more events before a write


class _Wait:
    """One stream's wait: ends after ``GATHER_TURNS`` turns, after two turns in which the
    run appended nothing, when the run finished, or when the bounded log is half full of
    events this stream has not read."""

    def __init__(self, log: RunLog, last_id: int) -> None:
        self.log = log
        self.last_id = last_id
        self.size = log.next_id
        self.turns = self.idle = 0
        self.over = trio.Event()

    def turn(self, nothing_runnable: bool) -> bool:
        """Judge one scheduler turn; True when the wait is over (its event then set)."""
        if self.over.is_set():  # the stream was cancelled meanwhile
            return True
        log = self.log
        self.turns += 1
        self.idle = self.idle + 1 if log.next_id == self.size else 0
        self.size = log.next_id
        if (
            # No task can run before some I/O: the run waits (for its model), nothing more
            # comes this turn or the next. (Trio would block in this I/O wait.)
            nothing_runnable
            or self.idle == 2
            or self.turns >= GATHER_TURNS
            or log.finished
            or log.next_id - 1 - self.last_id >= log.limit // 2  # a margin
        ):
            self.over.set()
            return True
        return False


class _TurnWatch(trio.abc.Instrument):
    """Judges the waiting streams of one Trio run at each scheduler turn."""

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self.token = token
        self.waits: list[_Wait] = []

    def before_io_wait(self, timeout: float) -> None:
        waits = self.waits
        if not waits:
            return
        nothing_runnable = timeout > 0
        ended = False
        for wait in waits:
            ended = wait.turn(nothing_runnable) or ended
        if ended:
            self.waits = [wait for wait in waits if not wait.over.is_set()]
        if nothing_runnable:
            # The woken streams are runnable now, but Trio computed this wait's timeout
            # before: a callback through the run's wake-up socket ends the wait at once.
            self.token.run_sync_soon(_nothing)


def _nothing() -> None:
    return None


_watch: trio.lowlevel.RunVar[_TurnWatch] = trio.lowlevel.RunVar("soulacy.http turn watch")


async def gathered(log: RunLog, last_id: int) -> None:
    """Return once the run stopped appending for now (see :class:`_Wait`): one write for what
    a fast run has ready rather than one per event."""
    try:
        watch = _watch.get()
    except LookupError:  # the first stream of this Trio run: one instrument for all of them
        watch = _TurnWatch(trio.lowlevel.current_trio_token())
        trio.lowlevel.add_instrument(watch)
        _watch.set(watch)
    wait = _Wait(log, last_id)
    watch.waits.append(wait)
    try:
        await wait.over.wait()
    finally:
        wait.over.set()  # cancelled: the watch drops it at the next turn
