"""MCP servers as one kernel service: each server is a supervised connection.

Every configured server gets a supervisor task in the service's nursery (never a system task):
it connects with the official SDK's ``Client`` (stdio: the SDK starts the process; HTTP: a
streamable HTTP session), lists the server's tools, and then watches the connection. When the
process exits, the stream ends, a ping goes unanswered or a call finds the connection broken,
the supervisor closes what is left (the SDK stops the process: stdin closed, then SIGTERM, then
SIGKILL to its process group) and connects again after the next backoff delay. On kernel
shutdown the service's nursery is cancelled and every server is stopped the same way.

The SDK is written on anyio and runs on its Trio backend as it is (decision 0033): no thread,
no second event loop.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs
import trio

from soulacy.kernel import Kernel, UsageError, current_tool_call, redact_text

from ._model import McpServer

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client._transport import TransportStreams
    from mcp_types import CallToolResult, RequestParamsMeta
    from mcp_types import Tool as McpTool

logger = logging.getLogger("soulacy.mcp")

State = Literal["starting", "ready", "restarting", "failed", "stopped"]
STABLE_AFTER = 60.0  # seconds up after which a server's failure streak starts again
# The key of the idempotency key in a call's _meta (a prefix of our own, as MCP asks of extensions)
IDEMPOTENCY_META_KEY = "soulacy/idempotency-key"


class McpStartError(UsageError):
    """MCP servers that agents need did not start (each named, with why)."""


class McpToolError(Exception):
    """The server answered the call with ``isError``: its text is the tool's error result."""


class McpServerLost(Exception):
    """The connection to the server broke during a call; the server is being restarted."""


class McpCallError(Exception):
    """The server refused the call at the protocol level (an unknown tool, bad arguments)."""


def describe(exc: BaseException) -> str:
    """One line for an exception, single-member exception groups unwrapped, secrets masked."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    if isinstance(exc, BaseExceptionGroup):
        text = "; ".join(describe(e) for e in exc.exceptions)
    elif not isinstance(exc, McpStartError):
        text = f"{type(exc).__name__}: {text}"
    return redact_text(text)


@attrs.define
class Statistics:
    state: State
    transport: str
    tools: int
    starts: int
    restarts: int
    last_error: str | None
    start_seconds: float | None  # how long the last successful start took


class ServerConnection:
    """One server: its supervisor, its current client and its last tool listing."""

    def __init__(self, server_id: str, config: McpServer, workspace: Path, needed: bool) -> None:
        self.id = server_id
        self.config = config
        self.workspace = workspace
        self.needed = needed  # some agent lists it in mcp_servers
        self.state: State = "starting"
        self.tools: list[McpTool] | None = None  # the last listing; kept while restarting
        self.last_error: str | None = None
        self.starts = 0
        self.restarts = 0
        self.start_seconds: float | None = None
        self.first_outcome = trio.Event()  # set once the first start succeeded or failed
        self._client: Client | None = None
        self._ready = trio.Event()
        self._lost = trio.Event()
        self._ready_at: float | None = None
        self._http_error: str | None = None  # the last HTTP error status the server answered
        self._last_logged: str | None = None

    def statistics(self) -> Statistics:
        return Statistics(
            self.state,
            self.config.kind,
            len(self.tools or ()),
            self.starts,
            self.restarts,
            self.last_error,
            self.start_seconds,
        )

    # -- supervision ---------------------------------------------------------------------

    async def supervise(self) -> None:
        """Connect, watch, reconnect with backoff; until cancelled. Never raises."""
        streak = 0
        while True:
            self._ready_at = None
            try:
                await self._session()
            except Exception as exc:
                self.last_error = describe(exc)
                if self._http_error:  # the SDK's error does not say what the server answered
                    self.last_error += f" ({self._http_error})"
            self._http_error = None
            ready_at = self._ready_since()
            if ready_at is not None and trio.current_time() - ready_at >= STABLE_AFTER:
                streak = 0  # it had been up a while: this is not a crash loop
            self._client = None
            if self._ready.is_set():
                self._ready = trio.Event()
            self._lost = trio.Event()
            never = self.tools is None
            self.state = "failed" if never else "restarting"
            self.first_outcome.set()
            delays = self.config.backoff
            delay = float(delays[min(streak, len(delays) - 1)].seconds) if delays else 1.0
            streak += 1
            # Each new reason is said once, loudly; the same reason again, quietly.
            repeated = self.last_error == self._last_logged
            self._last_logged = self.last_error
            level = logging.ERROR if self.needed else logging.WARNING
            logger.log(
                logging.DEBUG if repeated else level,
                "mcp server %r %s: %s; trying again in %ss",
                self.id,
                "did not start" if never else "stopped",
                self.last_error,
                delay,
            )
            await trio.sleep(delay)
            self.restarts += 1

    async def _session(self) -> None:
        from mcp import Client

        config = self.config
        with trio.CancelScope() as startup:
            startup.deadline = trio.current_time() + float(config.startup_timeout.seconds)
            began = time.perf_counter()
            async with Client(self._transport(), cache=None) as client:
                tools = await _list_all(client)
                startup.deadline = math.inf  # started: no deadline from here on
                self.tools, self._client, self.state = tools, client, "ready"
                self._ready_at = trio.current_time()
                self.start_seconds = time.perf_counter() - began
                self.starts += 1
                self.last_error = self._last_logged = None
                self._ready.set()
                self.first_outcome.set()
                logger.info(
                    "mcp server %r ready: %d tools in %.2fs",
                    self.id,
                    len(tools),
                    self.start_seconds,
                )
                async with trio.open_nursery() as watch:
                    if config.ping_interval.seconds > 0:
                        watch.start_soon(self._ping, client)
                    await self._lost.wait()
                    watch.cancel_scope.cancel()
                    self._client = None
        if startup.cancelled_caught:
            raise TimeoutError(
                f"no answer within startup_timeout {config.startup_timeout.seconds}s"
            )

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        config = self.config
        if config.kind == "http":
            assert config.url is not None
            return _watched(_http(config.url, config.headers, self._note_http), self._mark_lost)
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert config.command is not None
        cwd = self.workspace / config.cwd if config.cwd else self.workspace
        params = StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env), cwd=cwd
        )
        return _watched(stdio_client(params), self._mark_lost)

    def _note_http(self, status: str) -> None:
        self._http_error = status

    def _ready_since(self) -> float | None:
        return self._ready_at

    def _mark_lost(self, why: str) -> None:
        if not self._lost.is_set():
            self.last_error = self.last_error or why
            # Calls from now on wait for the next start (not for the old, closing client).
            self._client = None
            if self._ready.is_set():
                self._ready = trio.Event()
            if self.tools is not None:
                self.state = "restarting"
            self._lost.set()

    async def _ping(self, client: Client) -> None:
        interval = float(self.config.ping_interval.seconds)
        while True:
            await trio.sleep(interval)
            try:
                with trio.fail_after(max(interval, 10.0)):
                    await client.send_ping()
            except Exception as exc:
                self._mark_lost(f"no answer to a ping: {describe(exc)}")
                return

    # -- calls ---------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> str:
        """Call ``tool`` and return its text. A server restarting is waited for (the run's
        tool timeout bounds the wait); errors become exceptions the kernel shows the model."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        while self._client is None:
            if self.state == "stopped":
                raise McpServerLost(f"mcp server {self.id!r} is stopped")
            if self.state == "failed":  # never started: waiting would only hit the timeout
                raise McpServerLost(f"mcp server {self.id!r} is not running: {self.last_error}")
            await self._ready.wait()  # restarting: bounded by the run's tool timeout
        client = self._client
        call = current_tool_call()
        # The call's idempotency key, the same for every execution of the call (a run's retry
        # after a crash): an idempotent server may use it to act once.
        meta = None if call is None else {IDEMPOTENCY_META_KEY: call.idempotency_key}
        # an open map (extra items), which type checkers do not read yet
        sent = cast("RequestParamsMeta | None", meta)
        try:
            result = await client.call_tool(tool, dict(arguments), meta=sent)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise McpCallError(
                    f"mcp server {self.id!r} refused {tool!r}: {exc.message}"
                ) from exc
            self._mark_lost(f"the connection closed during a call to {tool!r}")
            raise McpServerLost(
                f"mcp server {self.id!r} stopped during the call to {tool!r};"
                " it is being restarted, and the call was not retried"
            ) from exc
        except Exception as exc:
            self._mark_lost(f"a call to {tool!r} failed: {describe(exc)}")
            raise McpServerLost(
                f"mcp server {self.id!r} failed during the call to {tool!r} ({describe(exc)});"
                " it is being restarted, and the call was not retried"
            ) from exc
        text = render(result)
        if result.is_error:
            raise McpToolError(text or f"tool {tool!r} of mcp server {self.id!r} failed")
        return text


def render(result: CallToolResult) -> str:
    """The text a model is shown of a call's result: text blocks as they are, other blocks
    described, structured content as JSON when there is no text."""
    import json

    parts: list[str] = []
    for block in result.content:
        kind = block.type
        if kind == "text":
            parts.append(block.text)  # type: ignore[union-attr]
        elif kind in ("image", "audio"):
            mime = getattr(block, "mime_type", "")
            size = len(getattr(block, "data", ""))
            parts.append(f"[{kind} {mime}, {size} base64 characters]")
        elif kind == "resource":
            resource = block.resource  # type: ignore[union-attr]
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"[resource {resource.uri}]")
        else:
            parts.append(f"[{kind} {getattr(block, 'uri', '')}]".rstrip())
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


def _import_sdk() -> None:
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401


async def _list_all(client: Client) -> list[McpTool]:
    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang a start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@asynccontextmanager
async def _http(
    url: str, headers: Mapping[str, str], note: Callable[[str], None]
) -> AsyncIterator[TransportStreams]:
    """A streamable HTTP transport whose requests carry ``headers``; its HTTP client closes
    with it. ``note`` hears of every error status (``HTTP 401 Unauthorized``)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def on_response(response: Any) -> None:
        if response.status_code >= 400:
            note(f"HTTP {response.status_code} {response.reason_phrase}")

    async with create_mcp_http_client(headers=dict(headers)) as http:
        http.event_hooks = {"request": [], "response": [on_response]}
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


@asynccontextmanager
async def _watched(
    inner: AbstractAsyncContextManager[TransportStreams], lost: Any
) -> AsyncIterator[TransportStreams]:
    """``inner``'s streams, with ``lost(why)`` called when the server side ends (a stdio
    server's process exited and its stdout closed): the supervisor restarts it even when no
    call is in flight."""
    import anyio
    from mcp.shared.message import SessionMessage

    async with inner as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                try:
                    async for message in read:
                        await send.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
            lost("the server closed the connection (its process exited?)")

        async with anyio.create_task_group() as pumps:
            pumps.start_soon(pump)
            try:
                yield receive, write
            finally:
                pumps.cancel_scope.cancel()


class McpService:
    """The kernel service ``mcp``: starts every enabled server, stops them on shutdown.

    ``serve`` hands ``task_status.started`` the statistics of each server once every server
    has either started or failed its first start. A server an agent lists in ``mcp_servers``
    that fails its first start fails the kernel's start (:class:`McpStartError`, naming each
    with why); a server no agent lists only logs a warning and keeps being retried.
    """

    name = "mcp"
    needed_by_runs = True  # `soulacy run` starts it too: its agents' tools live in it

    def __init__(self, kernel: Kernel, servers: Mapping[str, McpServer], needed: set[str]) -> None:
        self.kernel = kernel
        self.servers = dict(servers)
        self.needed = set(needed)
        self.connections: dict[str, ServerConnection] = {}
        self._connect_all()

    def _connect_all(self) -> None:
        workspace = Path(self.kernel.workspace)
        self.connections = {
            sid: ServerConnection(sid, config, workspace, sid in self.needed)
            for sid, config in self.servers.items()
        }

    def statistics(self) -> dict[str, Statistics]:
        return {sid: conn.statistics() for sid, conn in self.connections.items()}

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        failed: Sequence[ServerConnection] = ()
        # Importing the SDK takes seconds (pydantic, starlette …): not on the Trio thread.
        await trio.to_thread.run_sync(_import_sdk)
        if any(conn.state == "stopped" for conn in self.connections.values()):
            self._connect_all()  # the kernel starts its services again
        try:
            async with trio.open_nursery() as nursery:
                for conn in self.connections.values():
                    nursery.start_soon(conn.supervise)
                for conn in self.connections.values():
                    await conn.first_outcome.wait()
                failed = [c for c in self.connections.values() if c.needed and c.tools is None]
                if failed:
                    nursery.cancel_scope.cancel()
                else:
                    task_status.started(self.statistics())
                    await self.kernel.stopping.wait()
                    logger.debug("stopping %d mcp servers", len(self.connections))
                    nursery.cancel_scope.cancel()
        finally:
            logger.debug("mcp servers stopped")
            for conn in self.connections.values():
                conn.state = "stopped"
                conn._client = None
                conn._ready.set()  # a call waiting for a restart learns that it is stopped
        if failed:
            lines = "; ".join(f"{c.id!r}: {c.last_error}" for c in failed)
            raise McpStartError(
                f"MCP servers that agents list in mcp_servers did not start: {lines}"
            )
