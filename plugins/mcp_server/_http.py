"""``POST /mcp``: the MCP streamable HTTP transport, as a route of the HTTP plugin.

The route is an ordinary ``HttpRoute`` (``auth="key"``): the HTTP plugin checks the Host,
the Origin, the bearer key and its principal, and the body's limits before this module sees
the request. Its JSON body is then handed to the SDK's ``StreamableHTTPSessionManager`` as one
ASGI request, with the caller's principal in the scope, and the manager's answer is the route's.

The manager runs **stateless** with **JSON responses**: each POST is answered by one JSON
body, whichever process of a shared store receives it, and no request depends on an earlier
one; a route of the HTTP plugin answers a whole body, never a stream. So ``GET /mcp`` (the
optional server-to-client SSE stream) answers 405, as the specification allows, and nothing
is pushed to the client during a call (no progress notifications).

Nothing of the SDK is imported until the first request: the manager (and the SDK, imported in
a worker thread: seconds) start then, in the kernel's background nursery, and live until the
kernel stops.
"""

from __future__ import annotations

import json
import logging
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any

import trio

from soulacy.kernel import Kernel
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

logger = logging.getLogger("soulacy.mcp_server")

PATH = "/mcp"
# The ASGI scope's key that carries the principal the HTTP plugin authenticated.
PRINCIPAL_KEY = "soulacy.principal"
# Headers the SDK has no use for, kept from reaching it (it records a request's headers).
WITHHELD = frozenset({"authorization", "cookie", "content-length"})
RETRY_AFTER = "5"  # seconds, on a 503 while the server stops


def _import_sdk() -> None:
    import mcp.server.streamable_http_manager  # noqa: F401

    from . import _tools  # noqa: F401  (it imports the SDK's server and types)


def principal_of_request(ctx: ServerRequestContext[Any]) -> str | None:
    """The principal the HTTP plugin authenticated for the request ``ctx`` serves."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict) or PRINCIPAL_KEY not in scope:
        # Never a run without its caller: this request did not come through the route.
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_REQUEST

        raise MCPError(INVALID_REQUEST, "no authenticated principal for this request")
    principal: str | None = scope[PRINCIPAL_KEY]
    return principal


class McpHttp:
    """The ``/mcp`` route of one kernel, and the SDK's session manager behind it."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.manager: StreamableHTTPSessionManager | None = None
        self.failed: str | None = None  # why the manager could not start
        self._started: trio.Event | None = None  # set once it started, or failed to

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if self.kernel.stopping.is_set():
            raise HttpError(
                503,
                "the server is shutting down: it takes no new MCP request; retry on another server",
                headers={"retry-after": RETRY_AFTER},
            )
        manager = await self._manager()
        body = json.dumps(await request.json()).encode()
        return await exchange(manager, request, body)

    async def _manager(self) -> StreamableHTTPSessionManager:
        if self._started is None:
            started = self._started = trio.Event()
            if not self.kernel.start_soon(self._run, started, name="mcp_server"):
                self._started = None
                raise HttpError(503, "the kernel is not open: MCP requests are not served")
        await self._started.wait()
        if self.manager is not None:
            return self.manager
        if self.failed is not None:
            raise HttpError(503, f"the MCP server could not start: {self.failed}")
        raise HttpError(503, "the MCP server has stopped", headers={"retry-after": RETRY_AFTER})

    async def _run(self, started: trio.Event) -> None:
        """The session manager, from the first request until the kernel's background work
        is cancelled (after the services stopped: calls in flight end with the listener)."""
        try:
            try:
                await trio.to_thread.run_sync(_import_sdk)
            except ImportError as exc:
                self.failed = f"the MCP SDK is not installed ({exc}): pip install 'soulacy[mcp]'"
                logger.error("%s", self.failed)
                return
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from ._tools import agents_server

            manager = StreamableHTTPSessionManager(
                agents_server(self.kernel, principal_of_request),
                json_response=True,
                stateless=True,
                # The HTTP plugin checked Host and Origin (server.allowed_hosts, CORS) already.
                security_settings=None,
            )
            async with manager.run():
                self.manager = manager
                started.set()
                await trio.sleep_forever()
        finally:
            self.manager = None
            started.set()


async def exchange(
    manager: StreamableHTTPSessionManager, request: HttpRequest, body: bytes
) -> HttpResponse:
    """One request to ``manager`` as ASGI, its whole answer collected."""
    headers = [
        (name.encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
        if name not in WITHHELD
    ]
    headers.append((b"content-length", str(len(body)).encode()))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": None,
        "server": None,
        "state": {},
        PRINCIPAL_KEY: request.principal,
    }
    answered = trio.Event()
    delivered = False
    status: int | None = None
    out: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client is there until the answer is complete
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
            for name, value in message.get("headers", ()):
                out[name.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    try:
        await manager.handle_request(scope, receive, send)
    finally:
        answered.set()
    if status is None:
        raise HttpError(500, "the MCP server sent no answer")
    out.pop("content-length", None)  # the HTTP plugin sets it for the body it sends
    return HttpResponse(status, b"".join(chunks), out)
