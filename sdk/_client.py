"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _calls
from ._calls import Call
from ._models import ChatResponse, HistoryEntry, StreamEvent
from ._resume import DEFAULT_RECONNECTS, Follow
from ._settings import DEFAULT_TIMEOUT, Settings

__all__ = ["Client", "EventStream"]

T = TypeVar("T")


class Client:
    """A client of a Soulacy server's HTTP API (``/api/v1``).

    ``base_url`` defaults to ``$SOULACY_URL``, then ``http://127.0.0.1:8484``; ``api_key`` to
    ``$SOULACY_API_KEY`` (sent as a bearer token). ``timeout`` (seconds) applies to connecting
    and to each read and write; the default, 48 hours plus one minute, outlasts the server's
    own deadline for a run; None or 0 waits without limit. ``transport`` is an httpx transport
    (for proxies, retries or tests); ``max_reconnects`` bounds how many times in a row a stream
    reconnects without receiving a new event.

    Every method raises :class:`SoulacyError` when the call fails. Use the client as a context
    manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: httpx.BaseTransport | None = None,
        max_reconnects: int = DEFAULT_RECONNECTS,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout)
        self.max_reconnects = max_reconnects
        self.http = httpx.Client(
            base_url=self.settings.base_url,
            headers=self.settings.headers,
            timeout=self.settings.httpx_timeout,
            transport=transport,
        )
        """The underlying httpx client."""

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    @property
    def timeout(self) -> float | None:
        """The request timeout in seconds; None when waiting without limit."""
        return self.settings.timeout

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # -- chat ----------------------------------------------------------------------------------

    def chat(self, agent_id: str, text: str, session_id: str | None = None) -> str:
        """Send ``text`` to agent ``agent_id`` and return its reply.

        ``session_id`` continues a conversation (None starts a new one). For the run's
        metadata, use :meth:`chat_response`.
        """
        return self.chat_response(agent_id, text, session_id).reply

    def chat_response(
        self,
        agent_id: str,
        text: str,
        session_id: str | None = None,
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Run the agent and return the reply with the run's ids, status, verification and
        full metadata. ``run_id`` names the run (a retry with the same id resumes a workflow);
        ``overrides`` are execution-policy overrides (``{"max_turns": 5}``)."""
        body = _calls.chat_body(agent_id, text, session_id, run_id, user_id, overrides)
        return self._call(_calls.chat(body))

    def stream(
        self,
        agent_id: str,
        text: str,
        session_id: str | None = None,
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> EventStream:
        """Run the agent and yield its events as they happen, ending with ``result``.

        A dropped connection is resumed from the last event received (``Last-Event-ID``), so
        every event arrives exactly once. Iterate the returned :class:`EventStream`; use it as
        a context manager (or call ``close()``) to stop reading early.
        """
        body = _calls.chat_body(agent_id, text, session_id, run_id, user_id, overrides)
        return EventStream(self.http, Follow.chat(body, self.max_reconnects))

    def events(self, run_id: str, last_event_id: int | None = None) -> EventStream:
        """Follow (or replay) the events of run ``run_id`` after ``last_event_id`` (None: all
        the server still holds), until its ``result``."""
        return EventStream(self.http, Follow.run(run_id, last_event_id, self.max_reconnects))

    def cancel(self, run_id: str) -> bool:
        """Cancel a running run; False when it had already finished."""
        return self._call(_calls.cancel(run_id))

    # -- reading -------------------------------------------------------------------------------

    def history(self, session_id: str) -> list[HistoryEntry]:
        """The stored messages of a session, oldest first."""
        return self._call(_calls.history(session_id))

    def run(self, run_id: str) -> dict[str, Any]:
        """What the server knows of a run: ``running``, status, verification, metadata, proof."""
        return self._call(_calls.run(run_id))

    def agents(self) -> list[dict[str, Any]]:
        """The agents: ``id``, ``name``, ``description``, ``enabled``."""
        return self._call(_calls.agents())

    def preparation(self, agent_id: str) -> dict[str, Any]:
        """The execution policy an agent's runs get (``{"agent_id", "policy"}``)."""
        return self._call(_calls.preparation(agent_id))

    def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` when the server answers (no key needed)."""
        return self._call(_calls.health())

    def config(self) -> dict[str, Any]:
        """The server's configuration, secrets redacted (admin principals only)."""
        return self._call(_calls.config())

    def update_config(self, changes: Mapping[str, Any]) -> list[str]:
        """Change and save configuration keys (admins only); returns the keys that changed."""
        return self._call(_calls.update_config(changes))

    def _call(self, call: Call[T]) -> T:
        request = call.request
        try:
            response = self.http.request(
                request.method, request.path, json=request.json, headers=request.headers
            )
        except httpx.RequestError as exc:
            raise request.unanswered(exc) from exc
        return call.result(response)


class EventStream(Iterator[StreamEvent]):
    """The events of one run, delivered once each, ending after its ``result``.

    ``run_id`` is known from the first event on; ``response`` holds the run's outcome once the
    ``result`` event has come; :meth:`wait` reads to the end and returns it.
    """

    def __init__(self, http: httpx.Client, follow: Follow) -> None:
        self._follow = follow
        self._events = _read_events(http, follow)

    @property
    def run_id(self) -> str | None:
        return self._follow.run_id

    @property
    def last_event_id(self) -> int | None:
        """The id of the last event delivered (what a reconnection resumes after)."""
        return self._follow.last_event_id

    @property
    def response(self) -> ChatResponse | None:
        return self._follow.response

    @property
    def reconnects(self) -> int:
        """How many times the stream was resumed after a dropped connection."""
        return self._follow.reconnects

    def __iter__(self) -> EventStream:
        return self

    def __next__(self) -> StreamEvent:
        try:
            return next(self._events)
        except StopIteration:
            terminal = self._follow.take_terminal()
            if terminal is None:
                raise
            return terminal

    def wait(self) -> ChatResponse:
        """Read the remaining events and return the run's outcome."""
        for _ in self:
            pass
        return self._follow.outcome()

    def close(self) -> None:
        """Stop reading and close the connection (the run itself goes on)."""
        self._events.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _read_events(http: httpx.Client, follow: Follow) -> Generator[StreamEvent, None, None]:
    """The run's events but the terminal one (see :class:`Follow`), across reconnections."""
    while True:
        request = follow.request()
        try:
            with http.stream(
                request.method, request.path, json=request.json, headers=request.headers
            ) as response:
                if response.is_error:
                    response.read()
                    delay = follow.refused(response)
                else:
                    follow.opened()
                    for line in response.iter_lines():
                        event = follow.feed(line)
                        if event is not None and not event.is_terminal:
                            yield event
                    if follow.finished:
                        return
                    delay = follow.dropped(None)
        except httpx.RequestError as exc:
            if follow.finished:  # only the end of the body was lost
                return
            delay = follow.dropped(exc)
        time.sleep(delay)
