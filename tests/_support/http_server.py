"""Helpers for tests that talk to a real Soulacy HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
            async with open_kernel(kernel=make(), grace_period=1) as kernel:
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
