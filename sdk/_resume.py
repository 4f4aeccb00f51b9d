"""Following a run's event stream across dropped connections (the stream's rules, no I/O).

The first request is ``POST /chat/stream`` (or ``GET /runs/{id}/events`` to follow a run);
when its connection drops or ends before the terminal event, the clients reconnect to
``GET /api/v1/runs/{run_id}/events`` with ``Last-Event-ID`` set to the last event received, so
that every event arrives once: the server sends only later ones, and any repeat is skipped here.
"""

from __future__ import annotations

import datetime
import email.utils
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from . import _calls
from ._calls import Request
from ._errors import SoulacyError
from ._models import ChatResponse, StreamEvent
from ._sse import SseDecoder

__all__ = ["DEFAULT_RECONNECTS", "MAX_RETRY_AFTER", "Follow", "retry_after"]

DEFAULT_RECONNECTS = 8  # consecutive reconnections without a new event before giving up
# Too many requests, a proxy, or a restarting server: worth another try.
TRANSIENT = frozenset({429, 502, 503, 504})
MAX_DELAY = 5.0  # the longest back-off between two reconnections
MAX_RETRY_AFTER = 60.0  # the longest Retry-After waited for; a longer one raises at once


class Follow:
    """Where one run's event stream stands: the run id, the last event id, the result.

    A client loop sends each request of :meth:`attempts` after waiting the seconds it comes
    with. On a 2xx answer it calls :meth:`opened`, feeds every line to :meth:`feed`, delivers
    the events that returns, and calls :meth:`ended` at the end of the body; on an error status
    it reads the body and calls :meth:`refused`; when the connection fails, :meth:`dropped`.
    Those three decide whether (and after how long) the next attempt comes, or raise
    :class:`SoulacyError`; the attempts stop once the terminal event has come.

    :meth:`feed` hands out every event but the terminal one, so the loop reads the body to its
    end and returns; the stream objects then deliver :attr:`terminal` (:meth:`take_terminal`).
    So a reader that stops at the result leaves no generator suspended, which Trio would warn
    about.
    """

    def __init__(
        self,
        first: Request,
        *,
        run_id: str | None,
        last_event_id: int | None,
        resumable: bool,
        max_reconnects: int = DEFAULT_RECONNECTS,
    ) -> None:
        self.run_id = run_id
        self.last_event_id = last_event_id
        self.response: ChatResponse | None = None  # the run's outcome, once its result came
        self.error: dict[str, Any] | None = None  # the data of a terminal error event
        self.terminal: StreamEvent | None = None  # the last event: result (or an error)
        self._terminal_taken = False
        self.finished = False
        self.reconnects = 0  # how many times the stream was resumed
        self.max_reconnects = max_reconnects
        self._current = first
        self._resumable = resumable
        self._failures = 0
        self._delay = 0.0  # before the next attempt
        self._decoder = SseDecoder()
        self._nothing_more = False  # the last answer was a 204: the run has ended

    @classmethod
    def chat(cls, body: Mapping[str, Any], max_reconnects: int = DEFAULT_RECONNECTS) -> Follow:
        """A new run, started with ``POST /chat/stream``; resumable once the server took it."""
        run_id = body.get("run_id")
        return cls(
            _calls.chat_stream(dict(body)),
            run_id=None if run_id is None else str(run_id),
            last_event_id=None,
            resumable=False,
            max_reconnects=max_reconnects,
        )

    @classmethod
    def run(
        cls, run_id: str, last_event_id: int | None, max_reconnects: int = DEFAULT_RECONNECTS
    ) -> Follow:
        """An existing run, from just after ``last_event_id`` (None: from its first event)."""
        return cls(
            _calls.events(run_id, last_event_id),
            run_id=run_id,
            last_event_id=last_event_id,
            resumable=True,
            max_reconnects=max_reconnects,
        )

    def attempts(self) -> Iterator[tuple[float, Request]]:
        """(seconds to wait, request to send): the first request, then the reconnections after
        the last event received, until the terminal event has come."""
        yield 0.0, self._current
        while not self.finished:
            assert self.run_id is not None  # dropped() allows no reconnection without it
            self._current = _calls.events(self.run_id, self.last_event_id)
            self.reconnects += 1
            yield self._delay, self._current

    def opened(self, status: int = 200) -> None:
        """The current request was answered with the stream: the server holds the run. A 204
        says the run has ended and holds no event past the last one received."""
        self._resumable = True
        self._decoder = SseDecoder()
        self._nothing_more = status == 204

    def feed(self, line: str) -> StreamEvent | None:
        """One line of the stream; returns the event to deliver, if it completes a new one.

        The terminal event is kept as :attr:`terminal` instead (see the class).
        """
        event = self._decoder.feed(line)
        if event is None or self.finished:
            return None
        if event.id is not None:
            if self.last_event_id is not None and event.id <= self.last_event_id:
                return None  # already delivered
            self.last_event_id = event.id
            self._failures = 0  # progress: the reconnection budget starts again
        if event.event == "run" and self.run_id is None and event.data.get("run_id"):
            self.run_id = str(event.data["run_id"])
        if not event.is_terminal:
            return event
        if event.is_result:
            self.response = event.response()
        else:
            self.error = event.data
        self.terminal, self.finished = event, True
        return None

    def ended(self) -> None:
        """The body ended: the stream is done after its terminal event, else it reconnects
        (unless the server said there is nothing more: reconnecting would loop)."""
        if self.finished:
            return
        if self._nothing_more:
            what = "the run has ended and the server holds no event past the last one received"
            raise self._current.error(f"{self._current}: {what}", 204, None)
        self.dropped(None)

    def refused(self, response: httpx.Response) -> None:
        """The current request got an error status (body read): raise, or retry later.

        Only a reconnection (a GET) is retried, on a transient status, after the answer's
        ``Retry-After`` when it has one; a refused ``POST /chat/stream`` started no run.
        """
        error = self._current.failed(response)
        if self._current.method != "GET" or response.status_code not in TRANSIENT:
            raise error
        self._delay = self._retry(error, asked=retry_after(response))

    def dropped(self, exc: Exception | None) -> None:
        """The connection dropped (``exc``) or ended before the terminal event (None)."""
        if self.finished:  # only the end of the body was lost
            return
        self._decoder = SseDecoder()  # an unfinished event is lost; it comes again
        what = (
            "the stream ended before the run's result" if exc is None else "the connection dropped"
        )
        if self.run_id is None:
            what += " before the run's id arrived (it cannot be resumed)"
        error = self._current.unanswered(exc, what)
        if self.run_id is None or not self._resumable:
            raise error from exc
        self._delay = self._retry(error, exc)

    def _retry(
        self, error: SoulacyError, cause: Exception | None = None, asked: float | None = None
    ) -> float:
        """The seconds to wait before the next attempt, or the error when the budget is spent
        or the server asks for a longer wait than :data:`MAX_RETRY_AFTER`."""
        self._failures += 1
        note = None
        if self._failures > self.max_reconnects:
            note = f"gave up after {self.max_reconnects} reconnections"
        elif asked is not None and asked > MAX_RETRY_AFTER:
            note = f"the server asks to retry after {asked:g} s"
        if note is not None:
            raise self._current.error(f"{error} ({note})", error.status, error.body) from cause
        backoff = 0.0 if self._failures == 1 else min(0.25 * 2 ** (self._failures - 1), MAX_DELAY)
        return backoff if asked is None else max(backoff, asked)

    def take_terminal(self) -> StreamEvent | None:
        """The terminal event the first time it is asked for once the loop ended; then None."""
        if self._terminal_taken:
            return None
        self._terminal_taken = self.terminal is not None
        return self.terminal

    def outcome(self) -> ChatResponse:
        """The run's result once the stream has ended; a SoulacyError if it ended without."""
        if self.response is not None:
            return self.response
        detail = (self.error or {}).get("error", "the stream ended without the run's result")
        raise self._current.error(f"{self._current}: {detail}", body=self.error)


def retry_after(response: httpx.Response, now: float | None = None) -> float | None:
    """The seconds an answer's ``Retry-After`` asks to wait (a number or an HTTP date);
    None without one, or when it cannot be read."""
    value = response.headers.get("retry-after", "").strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # "-0000": UTC too
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
