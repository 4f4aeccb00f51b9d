"""Helpers of the SDK tests: a live server's handle, and transports that drop connections."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import httpx
import trio

from soulacy.kernel import Kernel, Tool
from soulacy.sdk import AsyncClient, Client
from soulacy.testing import Workspace, throwaway_plugin

T = TypeVar("T")

TIMEOUT = 120.0  # generous: the machine may be slow, but a hung test should still fail
CONFIG = """\
server:
  port: 0
  api_keys: {alice: key-a, bob: key-b}
  admins: [alice]
"""
GREETING = "Hello! How can I help?"
STEPS_REPLY = "all done now"


def echo(text: str) -> str:
    """Answer the text in capitals."""
    return text.upper()


def tools_plugin() -> Any:
    return throwaway_plugin(
        "sdk-tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(echo)]
    )


def write_agents(workspace: Workspace) -> None:
    """The agents every SDK test server has (all on the scripted model, or workflows)."""
    workspace.write_config(CONFIG)
    for name in ("hello", "assistant"):  # "assistant" is the agent of docs/sdk.md
        workspace.scripted_agent(name, [{"text": GREETING}], repeat=True)
    workspace.scripted_agent(  # ten events: run, run.limits, 2 x (tool.call, tool.result),
        "steps",  # three deltas and the result
        [
            {"tool": "echo", "arguments": {"text": "one"}},
            {"tool": "echo", "arguments": {"text": "two"}, "sleep": 0.2},
            {"text": STEPS_REPLY, "sleep": 0.2},
        ],
        tools=["echo"],
        repeat=True,
    )
    for name in ("slow", "researcher"):  # until cancelled
        workspace.scripted_agent(name, [{"text": "too late", "sleep": 3600}], repeat=True)
    workspace.write_agent(
        "wf",
        {
            "tools": ["echo"],
            "workflow": {
                "steps": [
                    {"id": "shout", "tool": "echo", "arguments": {"text": "{input}"}},
                    {"id": "again", "tool": "echo", "arguments": {"text": "{steps.shout.result}!"}},
                ]
            },
        },
    )


@dataclass
class LiveServer:
    """A kernel serving the HTTP API on 127.0.0.1 for one test."""

    url: str
    kernel: Kernel
    workspace: Workspace

    def client(
        self, api_key: str | None = "key-a", *, url: str | None = None, **options: Any
    ) -> Client:
        """A client of this server (or of ``url``, a proxy in front of it)."""
        options.setdefault("timeout", TIMEOUT)
        return Client(url or self.url, api_key, **options)

    def async_client(
        self, api_key: str | None = "key-a", *, url: str | None = None, **options: Any
    ) -> AsyncClient:
        options.setdefault("timeout", TIMEOUT)
        return AsyncClient(url or self.url, api_key, **options)


async def in_thread(function: Callable[[], T]) -> T:
    """Run blocking client code in a worker thread while the server runs on the test's loop."""
    return await trio.to_thread.run_sync(function)


# -- dropped connections -------------------------------------------------------------------------


class Cutter:
    """Where to cut one proxied connection: after ``keep`` events (None: never).

    Counted on the bytes from the server: the cut comes after the first response head and
    ``keep`` blank lines (the end of an SSE event; HTTP heads end with CRLFs, JSON bodies hold
    no blank line). Of the event that follows, the half that arrived is let through too, so
    that the client also receives an unfinished event, which it must discard.
    """

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.received = b""
        self.sent = 0

    def take(self, data: bytes) -> tuple[bytes, bool]:
        """(the bytes to pass on, whether to cut the connection after them)."""
        self.received += data
        point = self._point()
        if point is None:
            out, self.sent = self.received[self.sent :], len(self.received)
            return out, False
        following = self.received[point:]
        end = following.find(b"\n\n")
        following = following if end < 0 else following[:end]  # never a whole event
        return self.received[self.sent : point + len(following) // 2], True

    def _point(self) -> int | None:
        if self.keep is None:
            return None
        head = self.received.find(b"\r\n\r\n")
        if head < 0:
            return None
        point = head + 4
        for _ in range(self.keep):
            end = self.received.find(b"\n\n", point)
            if end < 0:
                return None
            point = end + 2
        return point


class DropProxy:
    """A TCP proxy in front of the server whose n-th connection is cut after ``cuts[n]`` events.

    The cut is a real disconnection: the client reads the end of the connection in the middle
    of a chunked body, and the server sees its client leave. httpx reuses idle connections, so
    a test counts connections, not requests.
    """

    def __init__(self, target: str) -> None:
        self.port = int(target.rsplit(":", 1)[1])
        self.cuts: list[int] = []
        self.url = ""
        self.connections = 0

    async def start(self, nursery: trio.Nursery) -> DropProxy:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
        return self

    async def _handle(self, downstream: trio.SocketStream) -> None:
        keep = self.cuts.pop(0) if self.cuts else None
        self.connections += 1
        upstream = await trio.open_tcp_stream("127.0.0.1", self.port)
        async with downstream, upstream, trio.open_nursery() as nursery:

            async def up() -> None:
                await _pump(downstream, upstream, Cutter(None))
                nursery.cancel_scope.cancel()

            async def down() -> None:
                await _pump(upstream, downstream, Cutter(keep))
                nursery.cancel_scope.cancel()

            nursery.start_soon(up)
            nursery.start_soon(down)


async def _pump(source: trio.SocketStream, sink: trio.SocketStream, cutter: Cutter) -> None:
    try:
        async for data in source:
            out, cut = cutter.take(bytes(data))
            if out:
                await sink.send_all(out)
            if cut:
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


Requested = list[tuple[str, str, str | None]]


def record(client: Client | AsyncClient) -> Requested:
    """Record (method, path, Last-Event-ID) of every request the client sends."""
    requests: Requested = []

    def note(request: httpx.Request) -> None:
        requests.append((request.method, request.url.path, request.headers.get("last-event-id")))

    async def async_note(request: httpx.Request) -> None:
        note(request)

    if isinstance(client, AsyncClient):
        client.http.event_hooks["request"].append(async_note)
    else:
        client.http.event_hooks["request"].append(note)
    return requests
