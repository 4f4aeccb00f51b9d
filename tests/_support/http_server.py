"""Helpers for tests that talk to a real Soulacy HTTP server."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from soulacy.kernel import Kernel, open_kernel

KEYS = {"alice": "key-alice", "bob": "key-bob", "root": "key-root"}


@attrs.define
class Server:
    kernel: Kernel
    url: str

    def client(self, who: str | None = "alice") -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {KEYS[who]}"} if who else {}
        return httpx.AsyncClient(base_url=self.url + "/api/v1", headers=headers, timeout=60)


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse an SSE body into [{id, event, data}] (data parsed as JSON)."""
    events = []
    for block in text.strip().split("\n\n"):
        event: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            event[key] = value
        if "event" in event:
            event["data"] = json.loads(event["data"])
            event["id"] = int(event["id"]) if "id" in event else None
            events.append(event)
    return events


@contextmanager
def serve_in_thread(make: Callable[[], Kernel]) -> Iterator[str]:
    """Run a kernel's services in a thread of their own (for sync clients); yields the URL."""
    box: dict[str, Any] = {}
    ready = threading.Event()

    def main() -> None:
        async def serve() -> None:
            async with open_kernel(kernel=make()) as kernel:
                box.update(
                    url=kernel.started["http"][0],
                    stop=trio.Event(),
                    token=trio.lowlevel.current_trio_token(),
                )
                ready.set()
                await box["stop"].wait()

        try:
            trio.run(serve)
        finally:
            ready.set()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(60)
    if "url" not in box:
        raise RuntimeError("the server thread did not start")
    try:
        yield str(box["url"])
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])
        thread.join(30)


def standard_agents(workspace: Any) -> None:
    """The agents the transport tests chat with: quick, slow and with a tool call."""
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    workspace.scripted_agent("slow", [{"text": "late", "sleep": 30}], repeat=True)
    workspace.scripted_agent("pause", [{"text": "after a pause", "sleep": 1}], repeat=True)
    workspace.scripted_agent(
        "tooly", [{"tool": "missing", "arguments": {}}, {"text": "done"}], repeat=True
    )


def keyed_config(extra: str = "") -> str:
    """config.yaml with the three test principals (root is the only admin). These servers end
    with runs in flight by design (the ``slow`` agent's): they do not drain them when they stop
    (``shutdown_grace: 0s``); the drain has tests of its own (test_http_shutdown*.py)."""
    keys = ", ".join(f"{p}: {k}" for p, k in KEYS.items())
    return (
        f"server:\n  port: 0\n  api_keys: {{{keys}}}\n  admins: [root]\n"
        f"  shutdown_grace: 0s\n{extra}"
    )


@asynccontextmanager
async def open_server(make_kernel: Callable[..., Kernel], **options: Any) -> AsyncIterator[Server]:
    """A kernel serving HTTP on 127.0.0.1:0 in this test's Trio run."""
    async with open_kernel(kernel=make_kernel(**options)) as running:
        yield Server(running, running.started["http"][0])


@asynccontextmanager
async def open_keyed_server(
    workspace: Any, make_kernel: Callable[..., Kernel], extra: str = ""
) -> AsyncIterator[Server]:
    """:func:`open_server` on a workspace with the three test principals (``keyed_config``,
    plus ``extra`` lines of its ``server:`` section) and the :func:`standard_agents`."""
    workspace.write_config(keyed_config(extra))
    standard_agents(workspace)
    async with open_server(make_kernel) as running:
        yield running


def host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def static_site(html: str) -> Iterator[str]:
    """A page served from another loopback port: another origin than the API."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()


async def stream_until(url: str, body: dict[str, Any], until: str) -> list[tuple[int, str]]:
    """POST /chat/stream to the server at ``url`` as alice, on a raw socket, and hang up once
    the event ``until`` arrived: the (id, name) of the events received (the run goes on
    without its stream)."""
    host, port = url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    stream = await trio.open_tcp_stream(host, int(port))
    try:
        await stream.send_all(
            b"POST /api/v1/chat/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Authorization: Bearer {KEYS['alice']}\r\n".encode()
            + f"Content-Length: {len(raw)}\r\n\r\n".encode()
            + raw
        )
        received = b""
        pattern = re.compile(rb"id: (\d+)\nevent: ([\w.]+)\ndata: [^\n]*\n\n")
        while True:
            events = [(int(i), name.decode()) for i, name in pattern.findall(received)]
            if any(name == until for _, name in events):
                return events
            chunk = await stream.receive_some(65536)
            assert chunk, received  # the server must not hang up first
            received += chunk
    finally:
        await stream.aclose()
