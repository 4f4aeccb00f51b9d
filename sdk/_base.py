"""What the two clients and their two event streams share: everything but the I/O.

A client builds each request and parses each answer with :mod:`._calls`, and follows a stream
with :class:`~._resume.Follow`; :class:`~soulacy.sdk.Client` and
:class:`~soulacy.sdk.AsyncClient` only add the loops that send the requests and read the
answers, with httpx's blocking or its awaitable calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Generic, Self, TypeVar

from . import _calls
from ._models import ChatResponse, StreamEvent
from ._resume import DEFAULT_RECONNECTS, Follow
from ._settings import DEFAULT_TIMEOUT, Settings

__all__ = ["AsyncClosing", "ClientBase", "Closing", "StreamBase"]

TransportT = TypeVar("TransportT")  # httpx.BaseTransport, or httpx.AsyncBaseTransport
HttpT = TypeVar("HttpT")  # httpx.Client, or httpx.AsyncClient
StreamT = TypeVar("StreamT")  # EventStream, or AsyncEventStream


class ClientBase(ABC, Generic[TransportT, HttpT, StreamT]):
    """What both clients are: settings, an httpx client, and the calls that return a stream.

    See :class:`~soulacy.sdk.Client` for the arguments.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: TransportT | None = None,
        max_reconnects: int = DEFAULT_RECONNECTS,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout)
        self.max_reconnects = max_reconnects
        self.http: HttpT = self._connect(transport)
        """The underlying httpx client."""

    @abstractmethod
    def _connect(self, transport: TransportT | None) -> HttpT:
        """The httpx client, on ``transport`` (None: httpx's default)."""

    @abstractmethod
    def _follow(self, follow: Follow) -> StreamT:
        """The event stream that reads ``follow``'s requests."""

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    @property
    def timeout(self) -> float | None:
        """The request timeout in seconds; None when waiting without limit."""
        return self.settings.timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def stream(
        self,
        agent_id: str,
        text: str,
        session_id: str | None = None,
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> StreamT:
        """Run the agent and yield its events as they happen, ending with ``result``.

        A dropped connection is resumed from the last event received (``Last-Event-ID``), so
        every event arrives exactly once. Iterate the returned stream (``async for`` with the
        :class:`~soulacy.sdk.AsyncClient`); use it as a context manager (or close it) to stop
        reading early. The options are those of ``chat_response``.
        """
        body = _calls.chat_body(agent_id, text, session_id, run_id, user_id, overrides)
        return self._follow(Follow.chat(body, self.max_reconnects))

    def events(self, run_id: str, last_event_id: int | None = None) -> StreamT:
        """Follow (or replay) the events of run ``run_id`` after ``last_event_id`` (None: all
        the server still holds), until its ``result``."""
        return self._follow(Follow.run(run_id, last_event_id, self.max_reconnects))


class StreamBase:
    """The events of one run, delivered once each, ending after its ``result``.

    ``run_id`` is known from the first event on; ``response`` holds the run's outcome once the
    ``result`` event has come.
    """

    def __init__(self, follow: Follow) -> None:
        self._follow = follow

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

    def _terminal(self, stop: type[Exception]) -> StreamEvent:
        """Once the reading loop has ended: the terminal event the first time, else ``stop``."""
        terminal = self._follow.take_terminal()
        if terminal is None:
            raise stop
        return terminal


class Closing:
    """``with`` support: leaving the block calls :meth:`close`."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClosing:
    """``async with`` support: leaving the block awaits :meth:`aclose`."""

    @abstractmethod
    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
