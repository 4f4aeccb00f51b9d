"""``GET /metrics`` in the Prometheus text format, on a bind of its own (``otel.metrics_bind``).

Beside the admin-only ``GET /metrics`` the plugin adds to the HTTP transport (through the HTTP
plugin's ``soulacy_http_routes``), this serves the same text to a scraper that cannot send a
key: the plugin's own small ASGI app with hypercorn, as the transport does, in the kernel's
nursery (``soulacy serve``). No authentication: bind it to loopback (the default host) or to a
network only the scraper reaches.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import trio

from soulacy.kernel import Kernel

from ._prometheus import CONTENT_TYPE

if TYPE_CHECKING:
    import hypercorn.config
    import hypercorn.typing

    from ._telemetry import Telemetry

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
PATH = "/metrics"


class MetricsApp:
    """The ASGI app: ``GET``/``HEAD /metrics``; anything else is 404 or 405."""

    def __init__(self, telemetry: Callable[[], Telemetry | None]) -> None:
        self.telemetry = telemetry

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] != PATH:
            await _answer(send, 404, b"not found: the metrics are at /metrics\n")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, b"method not allowed\n", [(b"allow", b"GET, HEAD")])
            return
        telemetry = self.telemetry()
        text = telemetry.prometheus_text() if telemetry is not None else ""
        body = text.encode()
        await _answer(
            send,
            200,
            b"" if scope["method"] == "HEAD" else body,
            [(b"content-type", CONTENT_TYPE.encode())],
            length=len(body),
        )


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    length: int | None = None,
) -> None:
    raw = [
        (b"content-length", str(len(body) if length is None else length).encode()),
        (b"cache-control", b"no-store"),
        *(headers or [(b"content-type", b"text/plain; charset=utf-8")]),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class MetricsService:
    """The ``otel-metrics`` service: hypercorn on ``otel.metrics_bind`` until the kernel stops.
    What it passes to ``task_status.started()`` (``kernel.started["otel-metrics"]``) is the
    list of its URLs, ``http://HOST:PORT/metrics``."""

    name = "otel-metrics"

    def __init__(
        self, kernel: Kernel, bind: str, telemetry: Callable[[], Telemetry | None]
    ) -> None:
        self.kernel = kernel
        self.bind = bind
        self.app = MetricsApp(telemetry)

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        import hypercorn.config

        config = hypercorn.config.Config()
        config.bind = [self.bind]
        config.accesslog = None
        config.graceful_timeout = 0.5
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(self._serve, config)
            task_status.started([f"{b.replace('0.0.0.0', '127.0.0.1')}{PATH}" for b in binds])

    async def _serve(
        self,
        config: hypercorn.config.Config,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        import hypercorn.trio

        # a plain ASGI callable: its messages are dicts, not hypercorn's TypedDicts
        app = cast("hypercorn.typing.ASGIFramework", self.app)
        await hypercorn.trio.serve(
            app,
            config,
            shutdown_trigger=self.kernel.stopping.wait,
            task_status=task_status,
        )
