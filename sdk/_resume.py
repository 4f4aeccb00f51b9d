"""Following a run's event stream across dropped connections (shared logic, no I/O).

The first request is ``POST /chat/stream`` (or ``GET /runs/{id}/events`` to follow a run);
when its connection drops or ends before the terminal event, the clients reconnect to
``GET /api/v1/runs/{run_id}/events`` with ``Last-Event-ID`` set to the last event received, so
that every event arrives once: the server sends only later ones, and any repeat is skipped here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from . import _calls
from ._calls import Request
from ._errors import SoulacyError
from ._models import ChatResponse, StreamEvent
from ._sse import SseDecoder

__all__ = ["DEFAULT_RECONNECTS", "Follow"]

DEFAULT_RECONNECTS = 8  # consecutive reconnections without a new event before giving up
TRANSIENT = frozenset({502, 503, 504})  # a proxy or a restarting server: worth another try
MAX_DELAY = 5.0


class Follow:
    """Where one run's event stream stands: the run id, the last event id, the result.

    A client loop asks :meth:`request` for what to send, calls :meth:`opened` on a 200 answer,
    feeds every line to :meth:`feed` (which returns the events to deliver), and on an error
    status, a dropped connection or an early end calls :meth:`refused` / :meth:`dropped`: they
    return how long to wait before reconnecting, or raise :class:`SoulacyError`.

    The loops hand out every event but the terminal one, read the body to its end, and return;
    the stream objects then deliver :attr:`terminal` (:meth:`take_terminal`). So a reader that
    stops at the result leaves no generator suspended, which Trio would warn about.
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
        self.error: dict[str, Any] | None = None  # the data of a terminal "error" event
        self.terminal: StreamEvent | None = None  # the last event: result (or error)
        self._terminal_taken = False
        self.finished = False
        self.reconnects = 0  # how many times the stream was resumed
        self.max_reconnects = max_reconnects
        self._first: Request | None = first
        self._current = first
        self._resumable = resumable
        self._failures = 0
        self._decoder = SseDecoder()

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

    def request(self) -> Request:
        """What to send next: the first request, then reconnections after the last event."""
        if self._first is not None:
            self._current, self._first = self._first, None
        else:
            assert self.run_id is not None  # dropped() allows no reconnection without it
            self._current = _calls.events(self.run_id, self.last_event_id)
            self.reconnects += 1
        return self._current

    def opened(self) -> None:
        """The current request was answered with the stream: the server holds the run."""
        self._resumable = True
        self._decoder = SseDecoder()

    def feed(self, line: str) -> StreamEvent | None:
        """One line of the stream; returns the event to deliver, if it completes a new one."""
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
        if event.is_result:
            self.response = event.response()
        elif event.is_terminal:
            self.error = event.data
        if event.is_terminal:
            self.terminal, self.finished = event, True
        return event

    def refused(self, response: httpx.Response) -> float:
        """The current request got an error status (body read): raise, or wait and retry."""
        error = self._current.failed(response)
        if self._current.method != "GET" or response.status_code not in TRANSIENT:
            raise error
        return self._retry(error)

    def dropped(self, exc: Exception | None) -> float:
        """The connection dropped (``exc``) or ended before the terminal event (None)."""
        self._decoder = SseDecoder()  # an unfinished event is lost; it comes again
        what = (
            "the stream ended before the run's result" if exc is None else "the connection dropped"
        )
        if self.run_id is None:
            what += " before the run's id arrived (it cannot be resumed)"
        error = self._current.unanswered(exc, what)
        if self.run_id is None or not self._resumable:
            raise error from exc
        return self._retry(error, exc)

    def _retry(self, error: SoulacyError, cause: Exception | None = None) -> float:
        self._failures += 1
        if self._failures > self.max_reconnects:
            raise SoulacyError(
                f"{error} (gave up after {self.max_reconnects} reconnections)",
                method=error.method,
                path=error.path,
                status=error.status,
                body=error.body,
            ) from cause
        return 0.0 if self._failures == 1 else min(0.25 * 2 ** (self._failures - 1), MAX_DELAY)

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
        raise SoulacyError(
            f"{self._current.method} {self._current.path}: {detail}",
            method=self._current.method,
            path=self._current.path,
            body=self.error,
        )
