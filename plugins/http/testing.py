"""Test support for the HTTP plugin's API, for this project's suite and for anyone serving it.

* :class:`HttpAdapter` drives ``/api/v1`` for the transport conformance kit
  (``soulacy.testing.check_transport``), which checks what every transport promises::

      adapter = HttpAdapter(url, keys={"alice": ALICE_KEY, "bob": BOB_KEY})
      await check_transport(adapter, "echo", principals=("alice", "bob"), slow_agent_id="slow")

* :func:`check_http_api` checks the wire format of ``/api/v1`` itself against a running
  server: JSON chat with its metadata, SSE with ids and a final ``result``, resuming with
  ``Last-Event-ID``, 404 for unknown runs — what a client of this API (the SDK, a browser's
  EventSource) relies on, beyond the transport contract.

Importing this module imports httpx and the transport kit of ``soulacy.testing`` (not pytest):
it is for test suites, not for the plugin at run time.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from soulacy.testing import RefusalKind, TransportEvent, TransportRefused

__all__ = ["HttpAdapter", "check_http_api", "parse_sse"]

PREFIX = "/api/v1"
KINDS: Mapping[int, RefusalKind] = {
    400: "invalid",
    401: "unauthorized",
    403: "unauthorized",
    404: "not_found",
    409: "conflict",
    413: "invalid",
    415: "invalid",
    422: "invalid",
    429: "busy",
}


def parse_sse(text: str) -> list[TransportEvent]:
    """The events of an SSE body (comments skipped; data parsed as JSON where it is)."""
    return [_event(block) for block in text.strip().split("\n\n") if _fields(block).get("event")]


def _fields(block: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in block.splitlines():
        if line and not line.startswith(":"):
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")
    return fields


def _event(block: str) -> TransportEvent:
    fields = _fields(block)
    try:
        data = json.loads(fields.get("data", "null"))
    except json.JSONDecodeError:
        data = fields.get("data")
    return TransportEvent(fields.get("id", ""), fields["event"], data)


class HttpAdapter:
    """The transport kit's adapter for ``/api/v1``: ``start_run`` posts ``/chat/stream`` and
    hangs up after the first event (a dropped connection: the run goes on); ``events`` reads
    ``/runs/{id}/events`` with ``Last-Event-ID``; ``cancel`` posts ``/chat/cancel``.

    ``keys`` maps principals to their bearer tokens; principal None sends ``headers`` alone
    (keyless loopback mode, or ``headers`` carrying a token). A 4xx answer is a
    :class:`TransportRefused`; any other is a crash (RuntimeError).
    """

    def __init__(
        self,
        base_url: str,
        keys: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.api = base_url.rstrip("/") + PREFIX
        self.keys = dict(keys or {})
        self.headers = dict(headers or {})
        self.timeout = timeout

    def client(self, principal: str | None = None) -> httpx.AsyncClient:
        headers = dict(self.headers)
        if principal is not None:
            headers["Authorization"] = f"Bearer {self.keys[principal]}"
        return httpx.AsyncClient(base_url=self.api, headers=headers, timeout=self.timeout)

    async def start_run(
        self,
        agent_id: str,
        text: str,
        *,
        principal: str | None = None,
        run_id: str | None = None,
        session_id: str | None = None,
    ) -> str:
        body: dict[str, Any] = {"agent_id": agent_id, "text": text}
        if run_id is not None:
            body["run_id"] = run_id
        if session_id is not None:
            body["session_id"] = session_id
        client = self.client(principal)
        async with client, client.stream("POST", "/chat/stream", json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise _refusal("POST /chat/stream", response)
            started = await _first_run_id(response)  # then hang up mid-stream
        if started is None:
            raise RuntimeError("POST /chat/stream: the stream ended before an event named its run")
        return started

    async def events(
        self, run_id: str, *, principal: str | None = None, after: str | None = None
    ) -> list[TransportEvent]:
        headers = {"Last-Event-ID": after} if after is not None else {}
        path = f"/runs/{urllib.parse.quote(run_id, safe='')}/events"
        async with self.client(principal) as client:
            response = await client.get(path, headers=headers)
        if response.status_code == 204:  # the client has seen the result: nothing more
            return []
        if response.status_code != 200:
            raise _refusal(f"GET {path}", response)
        return parse_sse(response.text)

    async def cancel(self, run_id: str, *, principal: str | None = None) -> bool:
        async with self.client(principal) as client:
            response = await client.post("/chat/cancel", json={"run_id": run_id})
        if response.status_code != 200:
            raise _refusal("POST /chat/cancel", response)
        return bool(response.json()["cancelled"])

    def malformed(self) -> Sequence[tuple[str, Callable[[], Awaitable[object]]]]:
        principal = next(iter(self.keys), None)

        def post(content: bytes, kind: str = "application/json") -> Callable[[], Awaitable[object]]:
            async def call() -> object:
                async with self.client(principal) as client:
                    response = await client.post(
                        "/chat/stream", content=content, headers={"content-type": kind}
                    )
                if response.status_code != 200:
                    raise _refusal("POST /chat/stream", response)
                return response.text

            return call

        def body(**fields: Any) -> bytes:
            return json.dumps(fields).encode()

        return [
            ("a body that is not JSON", post(b'{"agent_id": ')),
            ("a JSON array for a body", post(b"[]")),
            ("a JSON body not declared as JSON", post(body(agent_id="a", text="hi"), "text/plain")),
            ("a text that is not a string", post(body(agent_id="a", text=5))),
            ("a body without a text", post(body(agent_id="a"))),
            ("a run id with a slash", post(body(agent_id="a", text="hi", run_id="a/b"))),
            ("JSON nested 10,000 deep", post(b"[" * 10_000 + b"]" * 10_000)),
        ]


async def _first_run_id(response: httpx.Response) -> str | None:
    """The run id the first event of a stream names; then the connection is closed.

    httpx reads a body through a chain of async generators that stay suspended when reading
    stops early, and Trio warns about each one it collects (encode/httpx#3686): once the
    connection is closed, reading on fails at the bottom of the chain and finishes them all.
    """
    lines = response.aiter_lines()
    block: list[str] = []
    found = None
    try:
        async for line in lines:
            if line:
                block.append(line)
                continue
            text, block = "\n".join(block), []
            if _fields(text).get("event"):
                data = _event(text).data
                found = data.get("run_id") if isinstance(data, Mapping) else None
                break
    finally:
        await response.aclose()
        try:
            async for _ in lines:
                pass
        except Exception:  # the closed connection's error, expected
            pass
    return found if isinstance(found, str) and found else None


def _refusal(request: str, response: httpx.Response) -> Exception:
    kind = KINDS.get(response.status_code)
    try:
        said = str(response.json().get("error") or response.text)
    except (json.JSONDecodeError, AttributeError):
        said = response.text
    if kind is None:
        return RuntimeError(f"{request}: HTTP {response.status_code}: {said}")
    return TransportRefused(kind, f"HTTP {response.status_code}: {said}")


# -- the wire format of /api/v1 -----------------------------------------------------------------


def _expect(got: Any, expected: Any, what: str) -> None:
    if got != expected:
        raise AssertionError(f"{what}: expected {_show(expected)}, got {_show(got)}")


def _expect_that(ok: bool, what: str, expected: str, got: Any) -> None:
    if not ok:
        raise AssertionError(f"{what}: expected {expected}, got {_show(got)}")


def _show(value: Any, limit: int = 400) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


async def check_http_api(
    base_url: str, agent_id: str, headers: Mapping[str, str] | None = None
) -> None:
    """The HTTP/SSE wire format of ``/api/v1`` against a running server whose ``agent_id``
    answers with text: JSON chat with metadata, SSE with ids and a final ``result``, resume
    with Last-Event-ID, 404 for unknown runs. A failure is an AssertionError
    ``transport check: <what>: expected <E>, got <G>``."""
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/") + PREFIX, headers=dict(headers or {}), timeout=120
    ) as client:
        health = await client.get("/health")
        _expect(health.status_code, 200, "transport check: the status of GET /health")
        chat = await client.post("/chat", json={"agent_id": agent_id, "text": "hi"})
        _expect(chat.status_code, 200, f"transport check: the status of POST /chat ({chat.text})")
        body = chat.json()
        keys = ("reply", "run_id", "session_id", "status", "verification", "metadata")
        _expect_that(
            all(key in body for key in keys),
            "transport check: the keys of POST /chat's answer",
            f"all of {keys}",
            sorted(body),
        )
        stream = await client.post("/chat/stream", json={"agent_id": agent_id, "text": "hi"})
        events = parse_sse(stream.text)
        _expect_that(bool(events), "transport check: POST /chat/stream", "SSE events", stream.text)
        _expect_that(
            all(e.id for e in events),
            "transport check: the ids of POST /chat/stream's events",
            "an id on every event",
            [e.id for e in events],
        )
        _expect(events[-1].name, "result", "transport check: the last event of POST /chat/stream")
        result = events[-1].data
        result_keys = ("reply", "run_id", "session_id", "status", "metadata")
        _expect_that(
            isinstance(result, Mapping) and all(key in result for key in result_keys),
            "transport check: the keys of the result event",
            f"all of {result_keys}",
            sorted(result) if isinstance(result, Mapping) else result,
        )
        again = await client.get(
            f"/runs/{result['run_id']}/events", headers={"Last-Event-ID": events[0].id}
        )
        _expect(
            [e.id for e in parse_sse(again.text)],
            [e.id for e in events[1:]],
            "transport check: the event ids after reconnecting with Last-Event-ID of the"
            " first (each missed event once)",
        )
        missing = await client.get("/runs/no-such-run")
        _expect(missing.status_code, 404, "transport check: the status of GET /runs/no-such-run")
