"""Open SSE streams per principal (``server.max_streams_per_principal``; 0: no cap).

A stream holds a task, a connection and a reader of its run's log for as long as the client
keeps it open. Runs are capped per principal by the kernel; streams are not runs (a client may
open any number on one run, or on finished runs' replays), so without a cap of their own one key
could hold the server's memory and file descriptors that every other principal needs.

Streams opened with a run's events token (``?token=``: whoever holds the URL) count against the
token's principal and, apart, against that run's share: at most a tenth of the cap (at least
one) per run, so that a token leaked through a URL cannot take the whole of its owner's streams.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ._asgi import HttpError

KEY = "server.max_streams_per_principal"
_K = TypeVar("_K", bound=Hashable)
TOKEN_SHARE = 10  # a run's token streams: at most cap // TOKEN_SHARE (at least 1)


def token_limit(limit: int) -> int:
    """How many streams one run's events token may hold open under the cap ``limit``."""
    return max(1, limit // TOKEN_SHARE)


class StreamSlots:
    """How many streams each principal has open, and the cap they are counted against (read
    at each new stream, so that a ``PATCH /config`` of it applies to the next one)."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self.limit = limit
        self.open: Counter[str | None] = Counter()
        self.by_token: Counter[tuple[str | None, str]] = Counter()  # (principal, run id)

    @contextmanager
    def take(self, principal: str | None, token_run: str | None = None) -> Iterator[None]:
        """One stream of ``principal`` while the block runs (``token_run``: opened with that
        run's events token); a 429 when the principal, or the run's token, has its most open."""
        limit = self.limit()
        share = (principal, token_run) if token_run is not None else None
        if limit and self.open[principal] >= limit:
            raise _refused(
                f"this principal has {limit} event streams open, the most it may ({KEY});"
                " one frees when one of its streams closes",
                "streams",
                limit,
            )
        if limit and share is not None and self.by_token[share] >= token_limit(limit):
            most = token_limit(limit)
            raise _refused(
                f"this run's events token has {most} streams open, the most one run's token"
                f" may (a tenth of {KEY}); one frees when one of them closes",
                "token_streams",
                most,
            )
        self.open[principal] += 1
        if share is not None:
            self.by_token[share] += 1
        try:
            yield
        finally:
            _give_back(self.open, principal)
            if share is not None:
                _give_back(self.by_token, share)


def _give_back(counter: Counter[_K], key: _K) -> None:
    counter[key] -= 1
    if not counter[key]:
        del counter[key]


def _refused(message: str, scope: str, most: int) -> HttpError:
    return HttpError(
        429,
        message,
        headers={"retry-after": "1"},
        extra={"limit": {"scope": scope, "max": most, "key": KEY}},
    )
