"""The API's requests and the parsing of their answers, shared by both clients (no I/O here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ._errors import SoulacyError
from ._models import ChatResponse, HistoryEntry

__all__ = ["PREFIX", "Call", "Request"]

PREFIX = "/api/v1"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request to the API: method, path (with the /api/v1 prefix), JSON body, headers."""

    method: str
    path: str
    json: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of httpx's ``request`` and ``stream`` that send this request.

        httpx sends ``json`` with ``Content-Type: application/json``.
        """
        return {"method": self.method, "url": self.path, "json": self.json, "headers": self.headers}

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    def error(self, message: str, status: int | None = None, body: Any = None) -> SoulacyError:
        """The error of this request; ``message`` names it (``f"{request}: ..."``)."""
        return SoulacyError(message, method=self.method, path=self.path, status=status, body=body)

    def failed(self, response: httpx.Response) -> SoulacyError:
        """The error for an answer with an error status (its body already read)."""
        body = _body(response)
        detail = body.get("error") if isinstance(body, dict) else body
        message = f"{self} failed with HTTP {response.status_code}"
        if detail:
            message += f": {str(detail)[:500]}"
        if isinstance(body, dict) and isinstance(body.get("fields"), dict):
            message += " (" + "; ".join(f"{k}: {v}" for k, v in body["fields"].items()) + ")"
        return self.error(message, response.status_code, body)

    def unanswered(self, exc: Exception | None, what: str = "no answer") -> SoulacyError:
        """The error for a request that got no (complete) answer: status None."""
        message = f"{self}: {what}"
        if exc is not None:
            message += f": {str(exc) or type(exc).__name__}"
        return self.error(message)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """A request and how to read its JSON answer."""

    request: Request
    parse: Callable[[Any], T]

    def result(self, response: httpx.Response) -> T:
        """The parsed answer, or a SoulacyError for an error status or an unexpected body."""
        if response.is_error:
            raise self.request.failed(response)
        body = _body(response)
        try:
            return self.parse(body)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            message = f"{self.request}: unexpected answer: {exc!r}"
            raise self.request.error(message, response.status_code, body) from exc


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def segment(value: str) -> str:
    """One path segment, percent-encoded (``.`` and ``..`` too, which URLs would collapse)."""
    if value in {".", ".."}:
        return value.replace(".", "%2E")
    return quote(value, safe="")


def _dict(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise TypeError(f"expected a JSON object, got {type(body).__name__}")
    return body


# -- the endpoints -------------------------------------------------------------------------------


def chat_body(
    agent_id: str,
    text: str,
    session_id: str | None,
    run_id: str | None,
    user_id: str | None,
    overrides: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The body of ``POST /chat`` and ``POST /chat/stream``: unset options are left out."""
    body: dict[str, Any] = {"agent_id": agent_id, "text": text}
    options = {"session_id": session_id, "run_id": run_id, "user_id": user_id}
    body.update({k: v for k, v in options.items() if v is not None})
    if overrides:
        body["overrides"] = dict(overrides)
    return body


def chat(body: dict[str, Any]) -> Call[ChatResponse]:
    return Call(Request("POST", f"{PREFIX}/chat", body), lambda b: ChatResponse.from_json(_dict(b)))


def continue_run(
    run_id: str, text: str = "", overrides: Mapping[str, Any] | None = None
) -> Call[ChatResponse]:
    """``POST /runs/{run_id}/continue``: an incomplete run goes on in place."""
    body: dict[str, Any] = {"text": text}
    if overrides is not None:
        body["overrides"] = dict(overrides)
    request = Request("POST", f"{PREFIX}/runs/{segment(run_id)}/continue", body)
    return Call(request, lambda b: ChatResponse.from_json(_dict(b)))


def chat_stream(body: dict[str, Any]) -> Request:
    return Request("POST", f"{PREFIX}/chat/stream", body, {"accept": "text/event-stream"})


def events(run_id: str, last_event_id: int | None) -> Request:
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = str(last_event_id)
    return Request("GET", f"{PREFIX}/runs/{segment(run_id)}/events", headers=headers)


def confirm(
    run_id: str,
    call_id: str,
    approved: bool | None,
    approver: str | None = None,
    note: str | None = None,
    arguments_sha256: str | None = None,
    result: str | None = None,
) -> Call[dict[str, Any]]:
    """``POST /chat/confirm``: decide a tool call the run waits on (docs/approvals.md);
    ``result``: a call cut while it ran happened, with this result (``approved`` None). A
    ValueError, before anything is sent, when neither is given, or the result is blank."""
    if approved is None and result is None:
        raise ValueError(
            "confirm: give approved (True: run it, False: deny it) or, for a call cut while it"
            " ran, result (it happened: its result)"
        )
    if result is not None and not result.strip():
        raise ValueError(
            "confirm: result is blank: give the call's result as text (an empty result tells"
            " the model nothing)"
        )
    body: dict[str, Any] = {"run_id": run_id, "call_id": call_id}
    if approved is not None:
        body["approved"] = approved
    if result is not None:
        body["result"] = result
    if approver is not None:
        body["approver"] = approver
    if note is not None:
        body["note"] = note
    if arguments_sha256 is not None:
        body["arguments_sha256"] = arguments_sha256
    return Call(Request("POST", f"{PREFIX}/chat/confirm", body), _dict)


def cancel(run_id: str) -> Call[bool]:
    request = Request("POST", f"{PREFIX}/chat/cancel", {"run_id": run_id})
    return Call(request, lambda b: bool(_dict(b)["cancelled"]))


def history(session_id: str) -> Call[list[HistoryEntry]]:
    request = Request("GET", f"{PREFIX}/history/{segment(session_id)}")
    return Call(request, lambda b: [HistoryEntry.from_json(e) for e in _dict(b)["entries"]])


def run(run_id: str) -> Call[dict[str, Any]]:
    return Call(Request("GET", f"{PREFIX}/runs/{segment(run_id)}"), _dict)


def agents() -> Call[list[dict[str, Any]]]:
    return Call(Request("GET", f"{PREFIX}/agents"), lambda b: list(_dict(b)["agents"]))


def preparation(agent_id: str) -> Call[dict[str, Any]]:
    return Call(Request("GET", f"{PREFIX}/agents/{segment(agent_id)}/preparation"), _dict)


def health() -> Call[dict[str, Any]]:
    return Call(Request("GET", f"{PREFIX}/health"), _dict)


def ready() -> Call[dict[str, Any]]:
    return Call(Request("GET", f"{PREFIX}/ready"), _dict)


def config() -> Call[dict[str, Any]]:
    return Call(Request("GET", f"{PREFIX}/config"), lambda b: dict(_dict(b)["config"]))


def update_config(changes: Mapping[str, Any]) -> Call[list[str]]:
    request = Request("PATCH", f"{PREFIX}/config", {"changes": dict(changes)})
    return Call(request, lambda b: [str(key) for key in _dict(b)["changed"]])
