"""Minimal ASGI plumbing: requests in, JSON and SSE out."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from soulacy.kernel import json_encoder

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpError(Exception):
    """An error answer: status, message and (for validation) the fields at fault."""

    def __init__(
        self,
        status: int,
        message: str,
        fields: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.fields = dict(fields or {})
        self.headers = dict(headers or {})  # e.g. Allow on a 405, Retry-After on a 429
        self.extra = dict(extra or {})  # more members of the JSON body (a 429's limit)

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message, "status": self.status, **self.extra}
        if self.fields:
            out["fields"] = self.fields
        return out


@attrs.define
class Request:
    method: str
    path: str
    headers: dict[str, str]
    client: str | None
    query: str
    scheme: str
    receive: Receive
    send: Send
    params: dict[str, str] = attrs.Factory(dict)
    principal: str | None = None
    token_run: str | None = None  # the run whose events token authenticated the request
    streaming: bool = False  # its answer (an SSE stream) has begun: no other answer can follow

    @classmethod
    def from_scope(cls, scope: Mapping[str, Any], receive: Receive, send: Send) -> Request:
        headers = {
            k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())
        }
        client = scope.get("client")
        return cls(
            scope.get("method", "GET"),  # a WebSocket upgrade's scope has none: it is a GET
            scope["path"],
            headers,
            client[0] if client else None,
            scope.get("query_string", b"").decode("latin-1"),
            scope.get("scheme", "http"),
            receive,
            send,
        )

    async def body(self, limit: int, *, within: float = 0.0, min_rate: float = 0.0) -> bytes:
        """The whole body: 413 past ``limit`` bytes; 408 when it does not arrive ``within``
        seconds plus one per ``min_rate`` bytes received (``_limits.body_deadline``; ``within``
        0: no deadline)."""
        import trio  # on a request's path only: registering the plugin imports no trio

        from ._limits import body_deadline, body_too_slow

        declared = self.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise HttpError(413, f"request body larger than {limit} bytes")
        chunks, size = [], 0
        started = trio.current_time()
        while True:
            deadline = body_deadline(started, size, within, min_rate)
            message = None
            with trio.move_on_at(deadline):  # math.inf: none
                message = await self.receive()
            if message is None:
                raise body_too_slow(within, min_rate)
            if message["type"] == "http.disconnect":
                raise HttpError(400, "client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpError(413, f"request body larger than {limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


def parse_json(raw: bytes) -> Any:
    """The JSON value of a body (its nesting depth already bounded: see _limits)."""
    if not raw:
        raise HttpError(400, "expected a JSON body", {"body": "empty"})
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HttpError(400, f"invalid JSON: {exc}", {"body": "not JSON"}) from None
    except RecursionError:  # the depth bound should have caught it: never a 500 anyway
        raise HttpError(422, "invalid request body", {"body": "nested too deeply"}) from None


def adding_headers(send: Send, headers: Sequence[tuple[str, str]]) -> Send:
    """``send`` that adds ``headers`` to the answer's start (CORS headers on every answer)."""
    raw = [(k.encode(), v.encode()) for k, v in headers]

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *raw]}
        await send(message)

    return wrapped


async def send_empty(send: Send, status: int, headers: Mapping[str, str] | None = None) -> None:
    """An answer without a body (204)."""
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": b""})


async def send_json(
    send: Send, status: int, body: Any, headers: Mapping[str, str] | None = None
) -> None:
    payload = json.dumps(body, default=str).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


# json.dumps(data, default=str) exactly, without an encoder built per call: a stream encodes
# every event, and making the encoder cost twice the encoding of a text delta (decision 0043).
to_json: Callable[[Any], str] = json_encoder(default=str)


def sse(event_id: int | None, name: str, data: Any) -> bytes:
    """One SSE event (WHATWG format); data is JSON on one line."""
    return sse_text(event_id, name, to_json(data))


def sse_text(event_id: int | None, name: str, text: str) -> bytes:
    """One SSE event whose data is already JSON text (one line: json never writes a newline
    without ``indent``)."""
    if event_id is None:
        return f"event: {name}\ndata: {text}\n\n".encode()
    return f"id: {event_id}\nevent: {name}\ndata: {text}\n\n".encode()


async def refuse_websocket(
    scope: Mapping[str, Any], send: Send, status: int, body: Any, headers: Mapping[str, str]
) -> None:
    """Answer a WebSocket upgrade with an HTTP error (the ASGI ``websocket.http.response``
    extension, which hypercorn offers); without it, close the handshake (the server answers
    403 with no body)."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    payload = json.dumps(body, default=str).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "websocket.http.response.start", "status": status, "headers": raw})
    await send({"type": "websocket.http.response.body", "body": payload})
