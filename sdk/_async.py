"""The asynchronous client: the same methods as :class:`~soulacy.sdk.Client`, awaitable.

It runs under Trio and asyncio alike (httpx supports both).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _calls
from ._calls import Call
from ._models import ChatResponse, HistoryEntry, StreamEvent
from ._resume import DEFAULT_RECONNECTS, Follow
from ._settings import DEFAULT_TIMEOUT, Settings

__all__ = ["AsyncClient", "AsyncEventStream"]

T = TypeVar("T")


class AsyncClient:
    """The asynchronous client; see :class:`~soulacy.sdk.Client` for the arguments.

    Use it with ``async with``, or call :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        max_reconnects: int = DEFAULT_RECONNECTS,
    ) -> None:
        self.settings = Settings.resolve(base_url, api_key, timeout)
        self.max_reconnects = max_reconnects
        self.http = httpx.AsyncClient(
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

    async def aclose(self) -> None:
        """Close the connections."""
        await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    # -- chat ----------------------------------------------------------------------------------

    async def chat(self, agent_id: str, text: str, session_id: str | None = None) -> str:
        """Send ``text`` to agent ``agent_id`` and return its reply."""
        return (await self.chat_response(agent_id, text, session_id)).reply

    async def chat_response(
        self,
        agent_id: str,
        text: str,
        session_id: str | None = None,
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Run the agent; the reply with the run's ids, status, verification and metadata."""
        body = _calls.chat_body(agent_id, text, session_id, run_id, user_id, overrides)
        return await self._call(_calls.chat(body))

    def stream(
        self,
        agent_id: str,
        text: str,
        session_id: str | None = None,
        *,
        run_id: str | None = None,
        user_id: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> AsyncEventStream:
        """Run the agent and yield its events (``async for``), resuming dropped connections."""
        body = _calls.chat_body(agent_id, text, session_id, run_id, user_id, overrides)
        return AsyncEventStream(self.http, Follow.chat(body, self.max_reconnects))

    def events(self, run_id: str, last_event_id: int | None = None) -> AsyncEventStream:
        """Follow (or replay) the events of a run after ``last_event_id``."""
        return AsyncEventStream(self.http, Follow.run(run_id, last_event_id, self.max_reconnects))

    async def cancel(self, run_id: str) -> bool:
        """Cancel a running run; False when it had already finished."""
        return await self._call(_calls.cancel(run_id))

    # -- reading -------------------------------------------------------------------------------

    async def history(self, session_id: str) -> list[HistoryEntry]:
        """The stored messages of a session, oldest first."""
        return await self._call(_calls.history(session_id))

    async def run(self, run_id: str) -> dict[str, Any]:
        """What the server knows of a run."""
        return await self._call(_calls.run(run_id))

    async def agents(self) -> list[dict[str, Any]]:
        """The agents: ``id``, ``name``, ``description``, ``enabled``."""
        return await self._call(_calls.agents())

    async def preparation(self, agent_id: str) -> dict[str, Any]:
        """The execution policy an agent's runs get."""
        return await self._call(_calls.preparation(agent_id))

    async def health(self) -> dict[str, Any]:
        """``{"status": "ok"}`` when the server answers."""
        return await self._call(_calls.health())

    async def config(self) -> dict[str, Any]:
        """The server's configuration, secrets redacted (admins only)."""
        return await self._call(_calls.config())

    async def update_config(self, changes: Mapping[str, Any]) -> list[str]:
        """Change and save configuration keys (admins only); the keys that changed."""
        return await self._call(_calls.update_config(changes))

    async def _call(self, call: Call[T]) -> T:
        request = call.request
        try:
            response = await self.http.request(
                request.method, request.path, json=request.json, headers=request.headers
            )
        except httpx.RequestError as exc:
            raise request.unanswered(exc) from exc
        return call.result(response)


class AsyncEventStream(AsyncIterator[StreamEvent]):
    """The events of one run (``async for``), once each, ending after its ``result``.

    Use ``async with`` (or :meth:`aclose`) to stop reading early.
    """

    def __init__(self, http: httpx.AsyncClient, follow: Follow) -> None:
        self._follow = follow
        self._events = _read_events(http, follow)

    @property
    def run_id(self) -> str | None:
        return self._follow.run_id

    @property
    def last_event_id(self) -> int | None:
        """The id of the last event delivered."""
        return self._follow.last_event_id

    @property
    def response(self) -> ChatResponse | None:
        return self._follow.response

    @property
    def reconnects(self) -> int:
        """How many times the stream was resumed after a dropped connection."""
        return self._follow.reconnects

    def __aiter__(self) -> AsyncEventStream:
        return self

    async def __anext__(self) -> StreamEvent:
        try:
            return await self._events.__anext__()
        except StopAsyncIteration:
            terminal = self._follow.take_terminal()
            if terminal is None:
                raise
            return terminal

    async def wait(self) -> ChatResponse:
        """Read the remaining events and return the run's outcome."""
        async for _ in self:
            pass
        return self._follow.outcome()

    async def aclose(self) -> None:
        """Stop reading and close the connection (the run itself goes on)."""
        await self._events.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def _read_events(
    http: httpx.AsyncClient, follow: Follow
) -> AsyncGenerator[StreamEvent, None]:
    """The run's events but the terminal one (see :class:`Follow`), across reconnections."""
    while True:
        request = follow.request()
        try:
            async with http.stream(
                request.method, request.path, json=request.json, headers=request.headers
            ) as response:
                if response.is_error:
                    await response.aread()
                    delay = follow.refused(response)
                else:
                    follow.opened()
                    lines = response.aiter_lines()
                    try:
                        async for line in lines:
                            event = follow.feed(line)
                            if event is not None and not event.is_terminal:
                                yield event
                    finally:
                        await _release(response, lines)
                    if follow.finished:
                        return
                    delay = follow.dropped(None)
        except httpx.RequestError as exc:
            if follow.finished:  # only the end of the body was lost
                return
            delay = follow.dropped(exc)
        await _sleep(delay)


async def _release(response: httpx.Response, lines: AsyncIterator[str]) -> None:
    """Close a response, also when its reading stopped early.

    httpx reads a body through a chain of async generators, which stay suspended when reading
    stops early, and Trio warns about each suspended generator it collects (encode/httpx#3686).
    Once the connection is closed, the next read fails at the bottom of the chain, and that
    failure finishes every generator on its way up. A body read to its end is left as it is.
    """
    await response.aclose()
    try:
        async for _ in lines:
            pass
    except Exception:  # the closed connection's error, expected
        pass


async def _sleep(seconds: float) -> None:
    """Sleep under whichever event loop runs: asyncio, or else Trio."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        import trio  # only reached under Trio, which is then installed

        await trio.sleep(seconds)
    else:
        await asyncio.sleep(seconds)
