"""The asynchronous client: the same methods as :class:`~soulacy.sdk.Client`, awaitable.

httpx's awaitable calls around the shared core (:mod:`._base`). It runs under Trio and asyncio
alike (httpx supports both).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, TypeVar

import httpx
import sniffio

from . import _calls
from ._base import AsyncClosing, ClientBase, StreamBase
from ._calls import Call
from ._models import ChatResponse, HistoryEntry, StreamEvent
from ._resume import Follow

__all__ = ["AsyncClient", "AsyncEventStream"]

T = TypeVar("T")


class AsyncClient(
    ClientBase[httpx.AsyncBaseTransport, httpx.AsyncClient, "AsyncEventStream"], AsyncClosing
):
    """The asynchronous client; see :class:`~soulacy.sdk.Client` for the arguments.

    Use it with ``async with``, or call :meth:`aclose`.
    """

    def _connect(self, transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=transport, **self.settings.client_options)

    def _follow(self, follow: Follow) -> AsyncEventStream:
        return AsyncEventStream(self.http, follow)

    async def aclose(self) -> None:
        """Close the connections."""
        await self.http.aclose()

    # -- chat (stream and events: see ClientBase) ----------------------------------------------

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

    async def continue_run(
        self, run_id: str, text: str = "", *, overrides: Mapping[str, Any] | None = None
    ) -> ChatResponse:
        """Continue a run that ended ``incomplete`` (a limit, a stall, a timeout) in place:
        the same run id as its next attempt, its conversation and tool results as they are,
        ``text`` as an optional steering message, ``overrides`` the limits of this attempt
        (``{"max_turns": 50}``). A run that is not incomplete is a SoulacyError with status
        409; another principal's, 404."""
        return await self._call(_calls.continue_run(run_id, text, overrides))

    async def confirm(
        self,
        run_id: str,
        call_id: str,
        *,
        approved: bool | None = None,
        approver: str | None = None,
        note: str | None = None,
        arguments_sha256: str | None = None,
        result: str | None = None,
    ) -> dict[str, Any]:
        """Approve or deny a tool call the run waits on; the decision as stored. With
        ``arguments_sha256`` (the ``tool.approval`` event's) it applies to those arguments
        only: other arguments are a SoulacyError with status 409. ``result`` (without
        ``approved``): a call cut while it ran (the ``tool.approval`` event says ``cut``)
        happened, and this is its result (not blank); it is not run again and the model gets
        it. Neither ``approved`` nor ``result``: a ValueError, not sent."""
        return await self._call(
            _calls.confirm(run_id, call_id, approved, approver, note, arguments_sha256, result)
        )

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

    async def ready(self) -> dict[str, Any]:
        """``{"status": "ready", ...}`` when the server takes requests; a SoulacyError with
        status 503 while its store does not answer or it stops."""
        return await self._call(_calls.ready())

    async def config(self) -> dict[str, Any]:
        """The server's configuration, secrets redacted (admins only)."""
        return await self._call(_calls.config())

    async def update_config(self, changes: Mapping[str, Any]) -> list[str]:
        """Change and save configuration keys (admins only); the keys that changed."""
        return await self._call(_calls.update_config(changes))

    async def _call(self, call: Call[T]) -> T:
        try:
            response = await self.http.request(**call.request.arguments)
        except httpx.RequestError as exc:
            raise call.request.unanswered(exc) from exc
        return call.result(response)


class AsyncEventStream(StreamBase, AsyncIterator[StreamEvent], AsyncClosing):
    """The events of one run (``async for``), once each, ending after its ``result``.

    Use ``async with`` (or :meth:`aclose`) to stop reading early.
    """

    def __init__(self, http: httpx.AsyncClient, follow: Follow) -> None:
        super().__init__(follow)
        self._events = _read_events(http, follow)

    async def __anext__(self) -> StreamEvent:
        try:
            return await self._events.__anext__()
        except StopAsyncIteration:
            return self._terminal(StopAsyncIteration)

    async def wait(self) -> ChatResponse:
        """Read the remaining events and return the run's outcome."""
        async for _ in self:
            pass
        return self._follow.outcome()

    async def aclose(self) -> None:
        """Stop reading and close the connection (the run itself goes on)."""
        await self._events.aclose()


async def _read_events(
    http: httpx.AsyncClient, follow: Follow
) -> AsyncGenerator[StreamEvent, None]:
    """Send ``follow``'s requests and feed it their answers; yields the events it hands out."""
    for delay, request in follow.attempts():
        await _sleep(delay)
        try:
            async with http.stream(**request.arguments) as response:
                if response.is_error:
                    await response.aread()
                    follow.refused(response)
                else:
                    follow.opened(response.status_code)
                    lines = response.aiter_lines()
                    try:
                        async for line in lines:
                            if (event := follow.feed(line)) is not None:
                                yield event
                    finally:
                        await _release(response, lines)
                    follow.ended()
        except httpx.RequestError as exc:
            follow.dropped(exc)


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
    """Sleep under whichever event loop runs this task: Trio, or else asyncio. Asked of sniffio
    (as httpx does), not of asyncio: a thread may have an asyncio loop set as running while a
    Trio task runs (Playwright's sync API leaves one so)."""
    if sniffio.current_async_library() == "trio":
        import trio  # only reached under Trio, which is then installed

        await trio.sleep(seconds)
    else:
        await asyncio.sleep(seconds)
