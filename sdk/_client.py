"""The synchronous client: httpx's blocking calls around the shared core (:mod:`._base`)."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping
from time import sleep
from typing import Any, TypeVar

import httpx

from . import _calls
from ._base import ClientBase, Closing, StreamBase
from ._calls import Call
from ._models import ChatResponse, HistoryEntry, StreamEvent
from ._resume import Follow

__all__ = ["Client", "EventStream"]

T = TypeVar("T")


class Client(ClientBase[httpx.BaseTransport, httpx.Client, "EventStream"], Closing):
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

    def _connect(self, transport: httpx.BaseTransport | None) -> httpx.Client:
        return httpx.Client(transport=transport, **self.settings.client_options)

    def _follow(self, follow: Follow) -> EventStream:
        return EventStream(self.http, follow)

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    # -- chat (stream and events: see ClientBase) ----------------------------------------------

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

    def continue_run(
        self, run_id: str, text: str = "", *, overrides: Mapping[str, Any] | None = None
    ) -> ChatResponse:
        """Continue a run that ended ``incomplete`` (a limit, a stall, a timeout) in place:
        the same run id as its next attempt, its conversation and tool results as they are,
        ``text`` as an optional steering message, ``overrides`` the limits of this attempt
        (``{"max_turns": 50}``). A run that is not incomplete is a SoulacyError with status
        409; another principal's, 404."""
        return self._call(_calls.continue_run(run_id, text, overrides))

    def confirm(
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
        """Approve or deny a tool call the run waits on (its agent's ``confirm_tools``); the
        decision as stored. A second decision is a SoulacyError with status 409, and so is
        an ``arguments_sha256`` (the ``tool.approval`` event's) that is not the call's.
        ``result`` (without ``approved``): a call cut while it ran (the ``tool.approval``
        event says ``cut``) happened, and this is its result (not blank); it is not run again
        and the model gets it. Neither ``approved`` nor ``result``: a ValueError, not sent."""
        return self._call(
            _calls.confirm(run_id, call_id, approved, approver, note, arguments_sha256, result)
        )

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

    def ready(self) -> dict[str, Any]:
        """``{"status": "ready", ...}`` when the server takes requests (no key needed); a
        :class:`SoulacyError` with status 503 while its store does not answer or it stops."""
        return self._call(_calls.ready())

    def config(self) -> dict[str, Any]:
        """The server's configuration, secrets redacted (admin principals only)."""
        return self._call(_calls.config())

    def update_config(self, changes: Mapping[str, Any]) -> list[str]:
        """Change and save configuration keys (admins only); returns the keys that changed."""
        return self._call(_calls.update_config(changes))

    def _call(self, call: Call[T]) -> T:
        try:
            response = self.http.request(**call.request.arguments)
        except httpx.RequestError as exc:
            raise call.request.unanswered(exc) from exc
        return call.result(response)


class EventStream(StreamBase, Iterator[StreamEvent], Closing):
    """The events of one run, delivered once each, ending after its ``result``.

    ``run_id`` is known from the first event on; ``response`` holds the run's outcome once the
    ``result`` event has come; :meth:`wait` reads to the end and returns it.
    """

    def __init__(self, http: httpx.Client, follow: Follow) -> None:
        super().__init__(follow)
        self._events = _read_events(http, follow)

    def __next__(self) -> StreamEvent:
        try:
            return next(self._events)
        except StopIteration:
            return self._terminal(StopIteration)

    def wait(self) -> ChatResponse:
        """Read the remaining events and return the run's outcome."""
        for _ in self:
            pass
        return self._follow.outcome()

    def close(self) -> None:
        """Stop reading and close the connection (the run itself goes on)."""
        self._events.close()


def _read_events(http: httpx.Client, follow: Follow) -> Generator[StreamEvent, None, None]:
    """Send ``follow``'s requests and feed it their answers; yields the events it hands out."""
    for delay, request in follow.attempts():
        sleep(delay)
        try:
            with http.stream(**request.arguments) as response:
                if response.is_error:
                    response.read()
                    follow.refused(response)
                else:
                    follow.opened(response.status_code)
                    for line in response.iter_lines():
                        if (event := follow.feed(line)) is not None:
                            yield event
                    follow.ended()
        except httpx.RequestError as exc:
            follow.dropped(exc)
