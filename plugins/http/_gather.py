"""A busy stream waits for what a fast run has ready, counted in events, woken once.

A stream that gathers (decision 0040) lets a run that outpaces its writes append more before
the next write. It sleeps on its run's log (``RunLog.wait_appended``), which wakes it once,
when ``GATHER_EVENTS`` events are unread, when the run finished, or when half the bounded log
is unread; a deadline of ``GATHER_SECONDS`` ends the wait of a run that went quiet mid-burst
(its model waits for a socket). Nothing watches the scheduler's turns: plain Trio, one
wake-up per write (decision 0043's count). See
docs/performance/0065-sse-streams-gather-by-waiting-on-their-run-log.md.
"""

from __future__ import annotations

import trio

from ._runlog import RunLog

GATHER_EVENTS = 32  # unread events a busy stream waits for before a write
# ... for this long at most: a run that stops short of them (its model waits for more)
# has what it appended written this much later, not at its next event
GATHER_SECONDS = 0.001


async def gathered(log: RunLog, last_id: int) -> None:
    """Return once the stream that wrote up to ``last_id`` has what a fast run has ready:
    ``GATHER_EVENTS`` unread (or half the bounded log, so that it never drops what this
    stream has not read), the run's result, or ``GATHER_SECONDS`` passed."""
    wanted = last_id + min(GATHER_EVENTS, log.limit // 2)
    if log.next_id > wanted or log.finished:
        return
    with trio.move_on_after(GATHER_SECONDS):
        await log.wait_appended(wanted)
