"""What the API answers, as small typed values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RESULT", "TERMINAL", "ChatResponse", "HistoryEntry", "StreamEvent"]

RESULT = "result"  # the terminal event of a run: its data is a ChatResponse
# "run_error": the server's HTTP deadline passed. Servers before 0.2 named it "error", which
# collides with EventSource's own error event; both are understood.
TERMINAL = frozenset({RESULT, "run_error", "error"})


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The outcome of one run: the reply and everything the server reports about it.

    ``metadata`` is the run's full metadata (turns, llm_calls, tool_calls, tokens, timings,
    error, incomplete_reason, proof, ...) exactly as the server sent it.
    """

    reply: str
    run_id: str
    session_id: str
    status: str
    verification: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        """Whether the run completed (rather than failed, was cancelled or stopped short)."""
        return self.status == "completed"

    @property
    def incomplete_reason(self) -> str | None:
        """Why the run did not complete (``max_turns``, ``shutdown``, ...); None if it did."""
        reason = self.metadata.get("incomplete_reason")
        return None if reason is None else str(reason)

    @property
    def interrupted(self) -> bool:
        """Whether the run was interrupted, not ended: its server stopped (reason
        ``shutdown``) before it finished. What it did is stored; send the same request with
        the same ``run_id`` (to any server on the store) to resume it as its next attempt, its
        completed tool calls replayed."""
        return self.status == "interrupted"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ChatResponse:
        """Parse the body of ``POST /chat`` or the data of a ``result`` event."""
        metadata = data.get("metadata")
        return cls(
            reply=str(data.get("reply") or ""),
            run_id=str(data["run_id"]),
            session_id=str(data.get("session_id") or ""),
            status=str(data.get("status") or ""),
            verification=str(data.get("verification") or ""),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        )


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One server-sent event of a run.

    ``event`` is its name: ``run`` (first; carries ``run_id``), ``run.limits``, ``delta``
    (``{"text": ...}``), ``tool.call``, ``tool.result``, ``workflow.step``, ``gap`` (events the
    server no longer holds), and the terminal ``result``. ``id`` is the event's number in its
    run (None for ``gap`` and for a result rebuilt from the store); ``data`` is its JSON.
    """

    id: int | None
    event: str
    data: dict[str, Any]

    @property
    def is_result(self) -> bool:
        """Whether this is the run's ``result`` event (see :meth:`response`)."""
        return self.event == RESULT

    @property
    def is_terminal(self) -> bool:
        """Whether the stream ends with this event (``result``, or a server-side ``error``)."""
        return self.event in TERMINAL

    @property
    def text(self) -> str:
        """The text of a ``delta`` event; empty for every other event."""
        return str(self.data.get("text", "")) if self.event == "delta" else ""

    def response(self) -> ChatResponse:
        """The run's outcome, carried by its ``result`` event."""
        if not self.is_result:
            raise ValueError(f"a {self.event!r} event carries no result")
        return ChatResponse.from_json(self.data)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One stored message of a session (``role`` user, assistant or tool).

    ``metadata`` is the reply metadata of the message's run once known; ``extra`` keeps
    fields that a newer server sends and this SDK does not know yet.
    """

    id: int
    role: str
    content: str
    session_id: str
    agent_id: str
    run_id: str | None
    created_at: float
    tokens: int | None = None
    metadata: dict[str, Any] | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    name: str | None = None
    is_error: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryEntry:
        """Parse one element of ``entries`` in ``GET /history/{session_id}``."""
        known = {
            "id",
            "role",
            "content",
            "session_id",
            "agent_id",
            "run_id",
            "created_at",
            "tokens",
            "metadata",
            "tool_call_id",
            "tool_calls",
            "name",
            "is_error",
        }
        metadata = data.get("metadata")
        return cls(
            id=int(data["id"]),
            role=str(data["role"]),
            content=str(data.get("content") or ""),
            session_id=str(data["session_id"]),
            agent_id=str(data.get("agent_id") or ""),
            run_id=_optional_str(data.get("run_id")),
            created_at=float(data.get("created_at") or 0.0),
            tokens=None if data.get("tokens") is None else int(data["tokens"]),
            metadata=dict(metadata) if isinstance(metadata, Mapping) else None,
            tool_call_id=_optional_str(data.get("tool_call_id")),
            tool_calls=[dict(call) for call in data.get("tool_calls") or ()],
            name=_optional_str(data.get("name")),
            is_error=bool(data.get("is_error", False)),
            extra={k: v for k, v in data.items() if k not in known},
        )


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)
