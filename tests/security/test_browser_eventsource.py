"""A real EventSource in headless Chromium follows a run with keys on, across a cut.

The browser cannot send ``Authorization``: it reads the run's events with a token
(``?token=``) issued to the run's owner. A proxy between browser and server cuts the first
connection mid-stream; EventSource reconnects with ``Last-Event-ID``, gets every event once and
``result`` last, and the server's 204 past the end stops it from reconnecting.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx
import pytest
from _support.http_server import (
    CHROMIUM,
    KEYS,
    keyed_config,
    serve_in_thread,
    sse_events,
    static_site,
)

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")
REQUEST = re.compile(r"GET [^ ]*/events[^ ]* HTTP/1\.1\r\n(?:.*?\r\n)*?\r\n", re.DOTALL)
LAST_EVENT_ID = re.compile(r"(?im)^last-event-id: *([^\r\n]*)")
NAMES = ["run", "run.limits", "delta", "tool.call", "tool.result", "gap", "result", "run_error"]


class CuttingProxy:
    """Forwards loopback TCP to the API; cuts the first events stream after its first tool call."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.event_requests: list[tuple[float, str]] = []  # (when, Last-Event-ID or "")
        self.cut = threading.Event()
        self._lock = threading.Lock()

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(client,), daemon=True).start()

    def _record(self, data: bytes) -> bool:
        """Note each events request in this client data; True for the one to cut."""
        cut_this = False
        for head in REQUEST.findall(data.decode("latin-1")):
            last = LAST_EVENT_ID.search(head)
            with self._lock:
                self.event_requests.append((time.monotonic(), last.group(1) if last else ""))
                cut_this = cut_this or not self.cut.is_set()
                self.cut.set()
        return cut_this

    def _connection(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.target)
        first = client.recv(65536)
        cut_this = self._record(first)
        upstream.sendall(first)
        # Later requests on this kept-alive connection (a reconnect) are counted too.
        threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
        try:
            while data := upstream.recv(65536):
                if cut_this and b"event: tool.call" in data:
                    # Deliver what came up to the first tool call's event, then drop the line.
                    client.sendall(data[: data.index(b"event: tool.call")])
                    # Let the browser take in what it got before the line drops: a close that
                    # races the data can discard it on a loaded machine (then the reconnect
                    # rightly carries no Last-Event-ID, and the test would prove nothing).
                    time.sleep(1.0)
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._record(data)
                sink.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


@contextmanager
def cutting_proxy(api: str) -> Iterator[CuttingProxy]:
    host, port = api.removeprefix("http://").split(":")
    proxy = CuttingProxy((host, int(port)))
    threading.Thread(target=proxy.serve, daemon=True).start()
    try:
        yield proxy
    finally:
        proxy.close()


PAGE = """<script>
window.seen = []; window.errors = 0;
window.follow = (url, names) => {
  const source = new EventSource(url);
  window.source = source;
  for (const name of names) {
    source.addEventListener(name, e => window.seen.push({name, id: e.lastEventId, data: e.data}));
  }
  source.onerror = () => { window.errors += 1; };
};
</script>"""


def test_eventsource_with_a_token_resumes_after_a_cut_and_stops_after_the_result(
    workspace: Workspace, make_kernel: Callable[..., Kernel], browser: Any
) -> None:
    steps = [{"tool": "missing", "arguments": {"n": n}, "sleep": 1.0} for n in range(3)]
    workspace.scripted_agent("steps", [*steps, {"text": "all done", "sleep": 1.0}])
    with static_site(PAGE) as page_url:
        origin = page_url.rstrip("/")
        workspace.write_config(keyed_config(f"  allowed_origins: ['{origin}']\n"))
        with serve_in_thread(make_kernel) as api, cutting_proxy(api) as proxy:
            alice = {"Authorization": f"Bearer {KEYS['alice']}"}
            with httpx.Client(base_url=api + "/api/v1", headers=alice, timeout=60) as client:
                runner = threading.Thread(
                    target=client.post,
                    args=("/chat",),
                    kwargs={"json": {"agent_id": "steps", "text": "go", "run_id": "browser-1"}},
                    daemon=True,
                )
                runner.start()
                deadline = time.monotonic() + 30
                while client.get("/runs/browser-1").status_code != 200:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                token = client.post("/runs/browser-1/token").json()["token"]
                url = f"http://127.0.0.1:{proxy.port}/api/v1/runs/browser-1/events?token={token}"
                context = browser.new_context()
                try:
                    page = context.new_page()
                    page.goto(page_url)
                    page.evaluate("([url, names]) => window.follow(url, names)", [url, NAMES])
                    page.wait_for_function(
                        "window.seen.some(e => e.name === 'result')", timeout=60_000
                    )
                    finished = time.monotonic()
                    page.wait_for_function("window.source.readyState === 2", timeout=10_000)
                    time.sleep(4.0)  # longer than EventSource's 3 s reconnection delay
                    seen = page.evaluate("window.seen")
                finally:
                    context.close()
                runner.join(30)
                truth = sse_events(
                    client.get("/runs/browser-1/events", headers={"Last-Event-ID": "0"}).text
                )
    assert proxy.cut.is_set()
    assert [(e["name"], int(e["id"])) for e in seen] == [(e["event"], e["id"]) for e in truth]
    assert [json.loads(e["data"]) for e in seen] == [e["data"] for e in truth]
    assert seen[-1]["name"] == "result"
    # The first request, one reconnect after the cut (with Last-Event-ID), one asked past the
    # end that got 204; none after that.
    lasts = [last for _, last in proxy.event_requests]
    assert len(lasts) == 3, proxy.event_requests
    assert lasts[0] == ""
    assert lasts[1] != ""
    assert int(lasts[2]) == truth[-1]["id"]
    assert all(when <= finished + 3.5 for when, _ in proxy.event_requests)
