"""Open SSE streams per principal (``server.max_streams_per_principal``; 0: no cap).

A stream holds a task, a connection and a reader of its run's log for as long as the client
keeps it open. Runs are capped per principal by the kernel; streams are not runs (a client may
open any number on one run, or on finished runs' replays), so without a cap of their own one key
could hold the server's memory and file descriptors that every other principal needs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._asgi import HttpError

KEY = "server.max_streams_per_principal"


class StreamSlots:
    """How many streams each principal has open, and the cap they are counted against (read
    at each new stream, so that a ``PATCH /config`` of it applies to the next one)."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.open: Counter[str | None] = Counter()

    @contextmanager
    def take(self, principal: str | None) -> Iterator[None]:
        """One stream of ``principal`` while the block runs; a 429 when it has the cap open."""
        limit = self.limit()
        if limit and self.open[principal] >= limit:
            raise HttpError(
                429,
                f"this principal has {limit} event streams open, the most it may"
                f" ({KEY}); close one, or wait for a run to end",
                headers={"retry-after": "1"},
                extra={"limit": {"scope": "streams", "max": limit, "key": KEY}},
            )
        self.open[principal] += 1
        try:
            yield
        finally:
            self.open[principal] -= 1
            if not self.open[principal]:
                del self.open[principal]
