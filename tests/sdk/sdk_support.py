"""Helpers of the SDK tests: a live server's handle, and transports that drop connections."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import trio

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.testing import Workspace, throwaway_plugin
from soulacy.sdk import AsyncClient, Client

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
    return throwaway_plugin("sdk-tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(echo)])


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

    def client(self, api_key: str | None = "key-a", **options: Any) -> Client:
        options.setdefault("timeout", TIMEOUT)
        return Client(self.url, api_key, **options)

    def async_client(self, api_key: str | None = "key-a", **options: Any) -> AsyncClient:
        options.setdefault("timeout", TIMEOUT)
        return AsyncClient(self.url, api_key, **options)


async def in_thread(function: Callable[[], T]) -> T:
    """Run blocking client code in a worker thread while the server runs on the test's loop."""
    return await trio.to_thread.run_sync(function)


# -- dropped connections -------------------------------------------------------------------------


class Cut:
    """Lets the first ``keep`` events of an SSE body through, then says to drop the connection.

    The event that follows (as far as it arrived) is cut in half, so that an unfinished event
    reaches the client too (it must be discarded, then received whole after reconnecting).
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.passed = 0
        self.buffer = b""

    def take(self, chunk: bytes) -> tuple[bytes, bool]:
        self.buffer += chunk
        out = b""
        while self.passed < self.keep and (end := self.buffer.find(b"\n\n")) >= 0:
            block, self.buffer = self.buffer[: end + 2], self.buffer[end + 2 :]
            out += block
            self.passed += not block.startswith(b":")  # comments are not events
        if self.passed < self.keep:
            return out, False
        end = self.buffer.find(b"\n\n")
        following = self.buffer if end < 0 else self.buffer[:end]  # never a whole event
        return out + following[: len(following) // 2], True


def _dropped() -> httpx.ReadError:
    return httpx.ReadError("connection dropped by the test transport")


class DroppingStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, keep: int) -> None:
        self.inner = inner
        self.cut = Cut(keep)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            out, drop = self.cut.take(chunk)
            if out:
                yield out
            if drop:
                self.inner.close()  # a real disconnection: the server sees the client leave
                raise _dropped()
        if self.cut.buffer:
            yield self.cut.buffer

    def close(self) -> None:
        self.inner.close()


class AsyncDroppingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, keep: int) -> None:
        self.inner = inner
        self.cut = Cut(keep)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            out, drop = self.cut.take(chunk)
            if out:
                yield out
            if drop:
                await self.inner.aclose()
                raise _dropped()
        if self.cut.buffer:
            yield self.cut.buffer

    async def aclose(self) -> None:
        await self.inner.aclose()


def _is_sse(response: httpx.Response) -> bool:
    return response.headers.get("content-type", "").startswith("text/event-stream")


class DropTransport(httpx.BaseTransport):
    """Real HTTP, but the n-th event stream is cut after ``cuts[n]`` events; records requests."""

    def __init__(self, *cuts: int) -> None:
        self.inner = httpx.HTTPTransport()
        self.cuts = list(cuts)
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = self.inner.handle_request(request)
        if not (self.cuts and _is_sse(response)):
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        stream = DroppingStream(response.stream, self.cuts.pop(0))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    def close(self) -> None:
        self.inner.close()


class AsyncDropTransport(httpx.AsyncBaseTransport):
    """The asynchronous :class:`DropTransport`."""

    def __init__(self, *cuts: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.cuts = list(cuts)
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = await self.inner.handle_async_request(request)
        if not (self.cuts and _is_sse(response)):
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        stream = AsyncDroppingStream(response.stream, self.cuts.pop(0))
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def requested(transport: DropTransport | AsyncDropTransport) -> list[tuple[str, str, str | None]]:
    """(method, path, Last-Event-ID) of every request the transport carried."""
    return [(r.method, r.url.path, r.headers.get("last-event-id")) for r in transport.requests]
