"""The HTTP API under /api/v1: chat (JSON and SSE), cancel, history, runs, agents, config; and
the routes other plugins add through ``soulacy_http_routes`` (API routes and root pages)."""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from soulacy.kernel import (
    CapacityError,
    ConfigError,
    Event,
    Kernel,
    PluginError,
    RunIdInUse,
    RunNotContinuable,
    RunRequest,
    UsageError,
    redact,
    redact_text,
    structure,
)
from soulacy.kernel.engine import SHUTDOWN
from soulacy.kernel.store import (
    RunEvents,
    RunRecord,
    StorageError,
    identity_differs,
    label_interrupted,
)
from soulacy.kernel.yamlio import load_yaml_file, plain
from soulacy.plugins.yamledit import trust_root_changes

from ._asgi import (
    HttpError,
    Receive,
    Request,
    Send,
    adding_headers,
    parse_json,
    refuse_websocket,
    send_empty,
    send_json,
    sse,
)
from ._config import ServerConfig, chat_deadline
from ._gather import gathered
from ._guard import Guard
from ._limits import RequestSlots, check_depth, check_json_type, check_unicode, last_event_id
from ._principals import Principals
from ._runlog import RunLog, RunLogs, frame_of
from ._shared import PAGE, pump_stored
from ._streams import StreamSlots
from ._tokens import EventTokens
from .hookspecs import HttpRequest, HttpResponse, HttpRoute

if TYPE_CHECKING:  # not exported by soulacy.kernel (yet): only its type is needed here
    from soulacy.kernel import RunHandle

PREFIX = "/api/v1"
OPENAPI = Path(__file__).with_name("openapi.json")
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream
STARTED_WAIT = 2.0  # seconds a stream's headers wait for its run's first event (queued: sent then)
TOKEN_HEADER = "soulacy-events-token"
# A run whose log is gone (a restart) replays its result under this id, the largest a
# JavaScript number holds exactly, so that "Last-Event-ID at or past it" means "seen the end".
REPLAYED_RESULT_ID = 2**53 - 1
SHUTDOWN_RETRY_AFTER = 1  # seconds: a stopping server's 503 (another server takes the run)
DEADLINE_EVENT = "run_error"  # not "error": EventSource fires its own "error" events
CAPACITY_KEYS = {
    "overall": "runtime.max_concurrent_sessions",
    "principal": "runtime.max_concurrent_sessions_per_principal",
}
_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")  # no "/": ids appear in URL paths
STORE_RETRY_AFTER = 5  # seconds: the Retry-After of a 503 while the store is unavailable
READY_EVERY = 1.0  # seconds a readiness check is reused: probes cost the store little
READY_WAIT = 2.0  # seconds /ready waits for the store; then "not ready", the check goes on
OUTAGE_LOG_EVERY = 60.0  # seconds between two warnings of one store outage
READY_KEY = "http.ready"  # the store's state row the readiness check reads and writes

log = logging.getLogger("soulacy.http")

Handler = Callable[[Request], Awaitable[None]]
Auth = Literal["none", "key", "key or token", "admin"]


@attrs.frozen
class ChatBody:
    agent_id: str
    text: str
    session_id: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    overrides: dict[str, Any] | None = None


@attrs.frozen
class ContinueBody:
    """``POST /runs/{run_id}/continue``: an optional steering message and the limits of the
    continued attempt (the overrides a chat takes)."""

    text: str = ""
    overrides: dict[str, Any] | None = None


@attrs.frozen
class CancelBody:
    run_id: str


@attrs.frozen
class ConfigPatch:
    changes: dict[str, Any]


# W3C Trace Context: a traceparent this server can continue (version 00's shape; an invalid
# one is ignored, as the recommendation says, and the run starts a trace of its own).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
# One list member of a tracestate: a key (simple or tenant@system) and a value of printable
# ASCII without "," or "=" (W3C Trace Context, 3.3.1).
_TRACESTATE = re.compile(
    r"[a-z0-9][a-z0-9_\-*/]{0,240}(@[a-z][a-z0-9_\-*/]{0,13})?=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)


def trace_context(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's ``traceparent`` (and ``tracestate``) for the run, when well formed: a
    tracing plugin continues the caller's trace (``RunRequest.trace``)."""
    parent = headers.get("traceparent", "").strip()
    if not _TRACEPARENT.fullmatch(parent) or parent.startswith("ff"):
        return {}
    found = {"traceparent": parent}
    state = headers.get("tracestate", "").strip()
    members = [m.strip() for m in state.split(",") if m.strip()] if len(state) <= 512 else []
    if members and len(members) <= 32 and all(_TRACESTATE.fullmatch(m) for m in members):
        found["tracestate"] = ",".join(members)  # else dropped whole, as W3C says
    return found


def _fields(error: ConfigError, key: str) -> dict[str, str]:
    return {
        issue.path.removeprefix(f"{key}.").removeprefix(key) or key: issue.message
        for issue in error.issues
    }


def parse(data: Any, type_: Any) -> Any:
    if not isinstance(data, dict):  # null, a list, a number: the converter would crash or coerce
        raise HttpError(422, "invalid request body", {"body": "expected a JSON object"})
    try:
        return structure(data, type_, origin="request", key="body")
    except ConfigError as exc:
        raise HttpError(422, "invalid request body", _fields(exc, "body")) from None


def _check_id(name: str, value: str | None) -> None:
    if value is not None and not _ID.fullmatch(value):
        raise HttpError(
            422,
            "invalid request body",
            {name: "expected 1-200 characters: letters, digits and ._:@-"},
        )


@attrs.frozen
class Route:
    method: str
    pattern: re.Pattern[str]
    handler: Handler
    auth: Auth


class Api:
    def __init__(self, kernel: Kernel, config: ServerConfig, logs: RunLogs) -> None:
        self.kernel = kernel
        self.config = config
        self.logs = logs
        self.runs: trio.Nursery | None = None  # where runs execute, apart from requests
        # Where a readiness check outlives the /ready that waits for it no longer (serve).
        self.background: trio.Nursery | None = None
        self._live: set[str] = set()  # the ids of the runs started here that have not ended
        self._quiet: trio.Event | None = None  # set when one ends or begins to wait for a person
        self.principals = Principals(config)
        self.guard = Guard(config)
        # This process's own secret; replaced by the store's when processes share it (serve).
        self.tokens = EventTokens(config.stream_token_ttl)
        self.streams = StreamSlots(
            lambda: int(kernel.config.section("server").max_streams_per_principal)
        )
        self.requests = RequestSlots(
            lambda: int(kernel.config.section("server").max_requests_per_principal)
        )
        self.store_status = StoreStatus(kernel)
        # run id -> principal, from the synchronous claim until the run's log is open: the
        # check and the claim of a run id are never separated by an await.
        run = r"/runs/(?P<run_id>[^/]+)"
        self.routes: list[Route] = [
            Route("GET", re.compile(r"/health"), self.health, "none"),
            Route("GET", re.compile(r"/ready"), self.ready, "none"),
            Route("GET", re.compile(r"/openapi\.json"), self.openapi, "none"),
            Route("POST", re.compile(r"/chat"), self.chat, "key"),
            Route("POST", re.compile(r"/chat/stream"), self.chat_stream, "key"),
            Route("POST", re.compile(r"/chat/cancel"), self.cancel, "key"),
            Route("GET", re.compile(r"/history/(?P<session_id>[^/]+)"), self.history, "key"),
            Route("GET", re.compile(run), self.run, "key"),
            Route("GET", re.compile(run + "/events"), self.events, "key or token"),
            Route("POST", re.compile(run + "/token"), self.issue_token, "key"),
            Route("POST", re.compile(run + "/continue"), self.continue_run, "key"),
            Route("POST", re.compile(run + "/continue/stream"), self.continue_stream, "key"),
            Route("GET", re.compile(r"/agents"), self.agents, "key"),
            Route(
                "GET",
                re.compile(r"/agents/(?P<agent_id>[^/]+)/preparation"),
                self.preparation,
                "key",
            ),
            Route("GET", re.compile(r"/config"), self.get_config, "key"),
            Route("PATCH", re.compile(r"/config"), self.patch_config, "key"),
        ]
        self.pages: list[Route] = []  # plugins' routes outside /api/v1 (a web UI)
        self._add_plugin_routes()

    def _add_plugin_routes(self) -> None:
        """The routes other plugins contribute (``soulacy_http_routes``), after the plugin's own:
        a path both match is the plugin's own. The same method and path twice is a PluginError."""
        found = self.kernel.pm.unique_contributions(
            "soulacy_http_routes", "HTTP route", kernel=self.kernel
        )
        own = {f"{r.method} {PREFIX}{r.pattern.pattern}" for r in self.routes}
        for name, (route, plugin) in found.items():
            if not isinstance(route, HttpRoute):
                raise PluginError(
                    f"plugin {plugin!r} answered soulacy_http_routes with {route!r}:"
                    " expected HttpRoute objects"
                )
            problems = route.problems()
            if problems:
                raise PluginError(f"plugin {plugin!r}: HTTP route {name!r}: {'; '.join(problems)}")
            if name in own:
                raise PluginError(
                    f"plugin {plugin!r} defines the HTTP route {name!r}, which is the http"
                    " plugin's own"
                )
            entry = Route(
                route.method, re.compile(route.path), self._contributed(route), route.auth
            )
            (self.routes if route.api else self.pages).append(entry)

    def _contributed(self, route: HttpRoute) -> Handler:
        """A plugin's handler served as the plugin's own: its answer sent, its errors too."""

        async def handle(request: Request) -> None:
            async def read_json() -> Any:
                return await self._json(request)

            view = HttpRequest(
                method=request.method,
                path=request.path,
                params=dict(request.params),
                query=urllib.parse.parse_qs(request.query, keep_blank_values=True),
                headers=dict(request.headers),
                principal=request.principal,
                is_admin=self.principals.is_admin(request.principal),
                sees_everything=self.principals.sees_everything(request.principal),
                read_json=read_json,
            )
            try:
                answer = await route.handler(view)
            except (HttpError, UsageError, StorageError):  # a StorageError is answered 503
                raise
            except ConfigError as exc:
                raise HttpError(
                    422, "invalid request", {issue.path: issue.message for issue in exc.issues}
                ) from None
            except Exception as exc:  # a plugin's bug must not take the server down
                import logging
                import traceback

                logging.getLogger("soulacy.http").error(
                    "route %s failed: %s",
                    route.name,
                    redact_text("".join(traceback.format_exception(exc)).rstrip()),
                    extra={"soulacy_principal": request.principal},  # whose request it was
                )
                raise HttpError(500, f"internal error in {route.name}") from None
            if answer.stream is not None:
                with self.streams.take(request.principal):
                    await _send_streamed(request, answer, route.name)
                return
            raw = [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
            if not any(k == b"content-length" for k, _ in raw):
                raw.append((b"content-length", str(len(answer.body)).encode()))
            await request.send(
                {"type": "http.response.start", "status": answer.status, "headers": raw}
            )
            await request.send({"type": "http.response.body", "body": answer.body})

        return handle

    # -- ASGI ----------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"unsupported ASGI scope {scope['type']!r}")
        request = Request.from_scope(scope, receive, send)
        cors = self.guard.cors_headers(request.headers)
        if cors:  # on whatever answer this request gets, errors included
            request.send = adding_headers(request.send, cors)
        try:
            self.guard.check_host(request.headers)
            handler = self._route(request)
            with self.requests.take(request.principal):
                await handler(request)
        except StorageError as exc:  # an outage, not a bug: 503, and no traceback per request
            await self._store_unavailable(request, exc)
        except HttpError as exc:
            await send_json(request.send, exc.status, exc.body(), exc.headers)
        except ConfigError as exc:
            await send_json(
                request.send,
                422,
                {"error": "invalid request", "status": 422, "fields": _fields(exc, "overrides")},
            )
        except UsageError as exc:
            await send_json(request.send, 400, {"error": str(exc), "status": 400})
        except BaseExceptionGroup as group:  # a stream's nursery wraps what its pump raised
            outage = _only_storage_errors(group)
            if outage is None:
                raise
            await self._store_unavailable(request, outage)

    async def _store_unavailable(self, request: Request, exc: StorageError) -> None:
        error = self.store_status.unavailable(exc)
        if request.streaming:  # its answer (SSE) has begun: end it; EventSource reconnects
            comment = f": {error.message}\n\n".encode()
            await request.send({"type": "http.response.body", "body": comment})
        else:
            await send_json(request.send, error.status, error.body(), error.headers)

    async def _websocket(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        """A WebSocket upgrade: this API has no WebSocket route (its streams are SSE). After the
        Host check and the key (as any route's), a 400 saying so; never a 500."""
        request = Request.from_scope(scope, receive, send)
        try:
            self.guard.check_host(request.headers)
            self.principals.authenticate(request.headers, request.client)
            raise HttpError(
                400,
                "WebSocket is not served: this API streams with Server-Sent Events"
                f" (POST {PREFIX}/chat/stream, GET {PREFIX}/runs/{{run_id}}/events)",
            )
        except HttpError as exc:
            await refuse_websocket(scope, send, exc.status, exc.body(), exc.headers)

    def _route(self, request: Request) -> Handler:
        if request.path == PREFIX or request.path.startswith(PREFIX + "/"):
            path, routes = request.path[len(PREFIX) :], self.routes
        elif self.pages and not request.path.startswith("/api/"):
            path, routes = request.path, self.pages
        else:
            raise HttpError(404, "not found")
        allowed = []
        for route in routes:
            match = route.pattern.fullmatch(path)
            if match is None:
                continue
            if route.method != request.method:
                allowed.append(route.method)
                continue
            request.params = match.groupdict()
            self.guard.check_origin(request.method, request.headers, request.scheme)
            if route.auth != "none":
                request.principal = self._principal(request, route.auth)
            if route.auth == "admin" and not self.principals.is_admin(request.principal):
                raise HttpError(403, "this principal is not an admin (server.admins)")
            return route.handler
        if not allowed:
            raise HttpError(404, "not found")
        if request.method == "OPTIONS":
            return self._options(allowed)
        raise HttpError(
            405,
            f"method not allowed (allowed: {', '.join(allowed)})",
            headers={"allow": ", ".join(allowed)},
        )

    def _options(self, allowed: list[str]) -> Handler:
        async def answer(request: Request) -> None:
            headers = {"allow": ", ".join([*allowed, "OPTIONS"])}
            if "access-control-request-method" in request.headers:  # a CORS preflight
                headers.update(self.guard.preflight(request.headers, allowed))
            await send_empty(request.send, 204, headers)

        return answer

    @property
    def shared(self) -> bool:
        """Whether runs' events are shared through the store (processes share the store)."""
        return self.config.share_events and self.kernel.store().multi_process

    def _principal(self, request: Request, auth: Auth) -> str:
        # A token only where the route takes one, and only without Authorization: a client
        # that can send the header uses its key.
        token = _query(request.query, "token") if auth == "key or token" else None
        if (
            token is not None
            and "authorization" not in request.headers
            and not self.principals.keyless
        ):
            principal = self.tokens.verify(token, request.params["run_id"], self.principals.keys)
            request.token_run = request.params["run_id"]
            return principal
        return self.principals.authenticate(request.headers, request.client)

    async def _json(self, request: Request) -> Any:
        """The JSON body of a request: JSON content type, bounded size and nesting depth."""
        check_json_type(request.headers)
        server: ServerConfig = self.kernel.config.section("server")  # a PATCH applies
        raw = await request.body(
            server.max_body_bytes,
            within=float(server.body_timeout.seconds),
            min_rate=server.body_min_rate,
        )
        check_depth(raw, server.max_json_depth)
        data = parse_json(raw)
        check_unicode(data)
        return data

    def _admin(self, request: Request) -> None:
        if not self.principals.is_admin(request.principal):
            raise HttpError(403, "this principal may not read or change the configuration")

    def _visible(self, owner: str | None, request: Request) -> bool:
        """A principal sees its own runs; keyless loopback mode's ``local`` sees everything."""
        return self.principals.sees_everything(request.principal) or (
            owner is not None and owner == request.principal
        )

    def _token_header(self, run_id: str, principal: str | None) -> dict[str, str]:
        if principal is None or self.principals.keyless:
            return {}
        key = self.principals.keys[principal]
        return {TOKEN_HEADER: self.tokens.issue(run_id, principal, key)[0]}

    # -- handlers --------------------------------------------------------------------------

    async def health(self, request: Request) -> None:
        """Liveness: the process answers. It never asks the store (``/ready`` does)."""
        await send_json(request.send, 200, {"status": "ok"})

    async def ready(self, request: Request) -> None:
        """Readiness: whether the store answers a read and a write (checked at most once a
        second, whoever asks). No key needed, as for ``/health``: load balancers probe without
        one, and the answer holds nothing of any principal. A server draining to stop is not
        ready: a load balancer sends new requests elsewhere while its runs finish."""
        if self.kernel.stopping.is_set():
            raise HttpError(
                503,
                "not ready: the server is shutting down (its runs are finishing); use another",
                headers={"retry-after": str(SHUTDOWN_RETRY_AFTER)},
                extra={"draining": True},
            )
        failed = await self.store_status.check(self.background)
        name = self.store_status.name
        store: dict[str, Any] = {"name": name, "available": failed is None}
        if failed is None:
            await send_json(request.send, 200, {"status": "ready", "store": store})
            return
        store["failed"] = failed
        what = f"within {READY_WAIT:g} s" if failed == "time" else f"a {failed}"
        raise HttpError(
            503,
            f"not ready: the store ({name}) did not answer {what}",
            headers={"retry-after": str(STORE_RETRY_AFTER)},
            extra={"store": store},
        )

    async def openapi(self, request: Request) -> None:
        await send_json(request.send, 200, json.loads(OPENAPI.read_text()))

    async def drained(self) -> None:
        """Return once every run started here has ended or waits for a person's decision on a
        tool call: it could not end without one, and stopping leaves it resumable as ever."""
        stop_watching = self.kernel.events.observe(self._wake_drain, ("tool.approval",))
        try:
            while self._live - self._awaiting_decisions():
                if self._quiet is None:
                    self._quiet = trio.Event()
                await self._quiet.wait()
        finally:
            stop_watching()

    def _awaiting_decisions(self) -> frozenset[str]:
        # A runner of another plugin may predate Runner.awaiting_decisions: then none is known.
        awaiting = getattr(self.kernel.runner(), "awaiting_decisions", None)
        return awaiting() if awaiting is not None else frozenset()

    def _wake_drain(self, event: Event) -> None:
        if self._quiet is not None and event.run_id in self._live:
            self._quiet.set()
            self._quiet = None

    def _refuse_when_stopping(self) -> None:
        if self.kernel.stopping.is_set() or self.runs is None:
            raise HttpError(
                503,
                "the server is shutting down: it takes no new run; retry on another server",
                headers={"retry-after": str(SHUTDOWN_RETRY_AFTER)},
            )

    async def _continued(self, request: Request) -> tuple[ChatBody, str | None]:
        """The chat that continues ``run_id`` (``POST /runs/{run_id}/continue``), and whose it
        is: 404 for a run the caller does not see, 409 unless it ended incomplete."""
        run_id = request.params["run_id"]
        _check_id("run_id", run_id)
        extra: ContinueBody = parse(await self._json(request), ContinueBody)
        stored = await self.kernel.store().get_run(run_id)
        if stored is None or not self._visible(stored.principal, request):
            raise HttpError(404, f"no run {run_id!r}")
        if stored.status != "incomplete":
            raise HttpError(409, str(RunNotContinuable(run_id, stored.status)))
        if await self.kernel.store().load_checkpoints(run_id):
            raise HttpError(409, str(RunNotContinuable.workflow(run_id, stored.status)))
        body = ChatBody(
            stored.agent_id,
            extra.text,
            stored.session_id,
            run_id,
            stored.user_id,
            extra.overrides,
        )
        return body, stored.principal  # the run stays its owner's, whoever continues it

    async def _start(
        self,
        request: Request,
        before_reserve: Callable[[], object] | None = None,
        *,
        continues: bool = False,
    ) -> tuple[RunLog, float]:
        self._refuse_when_stopping()
        if continues:
            body, principal = await self._continued(request)
        else:
            body, principal = parse(await self._json(request), ChatBody), request.principal
        _check_id("run_id", body.run_id)
        _check_id("session_id", body.session_id)
        # Only the workspace's agents: a request's agent id never reaches the file system.
        if body.agent_id not in self.kernel.agent_ids():
            raise HttpError(404, f"no agent {body.agent_id!r}")
        agent = self.kernel.agent(body.agent_id)
        if not agent.section("enabled"):
            raise HttpError(409, f"agent {body.agent_id!r} is disabled")
        policy = self.kernel.resolve_policy(body.agent_id, body.overrides or {})
        run_id = body.run_id or uuid.uuid4().hex
        session_id = body.session_id or uuid.uuid4().hex
        current = self.logs.get(run_id)  # a finished run's log still names its owner
        if current is not None and not self._visible(current.principal, request):
            raise HttpError(404, f"no run {run_id!r}")  # another principal's: not confirmed
        self._refuse_when_stopping()  # it may have begun to stop while the body came
        if before_reserve is not None:  # no await between it and the reservation
            before_reserve()
        run = RunRequest(
            body.agent_id,
            body.text,
            session_id=session_id,
            run_id=run_id,
            user_id=body.user_id,
            principal=principal,
            overrides=body.overrides or {},
            stream=True,
            continues=continues,
            trace=trace_context(request.headers),
        )
        # The runner's reservation holds the id from here on (taken with no await before it).
        handle = self._reserve(run)
        try:  # the reservation is given back if this request is refused after all
            stored = await self.kernel.store().get_run(run_id)
            if stored is not None and not self._visible(stored.principal, request):
                raise HttpError(404, f"no run {run_id!r}")  # another principal's
            if stored is not None:  # its own: a retry must be the same request
                mine = RunRecord(run_id, body.agent_id, session_id, body.user_id, principal)
                differs = identity_differs(mine, stored)
                if differs:  # refused before anything of it runs, as the engine would
                    raise _run_id_taken(run_id, differs)
            if continues and (stored is None or stored.status != "incomplete"):
                # continued (or ended otherwise) since it was read: read again under the id
                status = None if stored is None else stored.status
                raise HttpError(409, str(RunNotContinuable(run_id, status)))
            self._refuse_when_stopping()  # its runs' nursery may be closed by now
            log = self.logs.open(run_id, principal)
        except BaseException:
            self.kernel.runner().release(handle)
            raise
        assert self.runs is not None
        self._live.add(run_id)  # counted from here: a drain that begins now waits for it
        self.runs.start_soon(self._execute, attrs.evolve(run, reservation=handle), log)
        return log, chat_deadline(policy)

    def _reserve(self, run: RunRequest) -> RunHandle:
        """The runner's reservation: synchronous and atomic, with the concurrency caps."""
        run_id, principal = run.run_id, run.principal
        try:  # exclusive: HTTP answers 409 at once rather than queueing a retry
            return self.kernel.runner().reserve(run, exclusive=True)
        except RunIdInUse as exc:  # a live run holds it
            if exc.owner == principal:
                raise HttpError(409, f"run {run_id!r} is still running") from None
            raise HttpError(404, f"no run {run_id!r}") from None
        except CapacityError as exc:
            raise _capacity(exc) from None

    async def _execute(self, run: RunRequest, log: RunLog) -> None:
        run_id, session_id, principal = str(run.run_id), str(run.session_id), run.principal
        try:
            await self.kernel.runner().run(run)
        except Exception as exc:  # one run's failure must never take the server down
            import logging  # this function's alone here; the module keeps no other logger
            import traceback

            # Swallowed, so said: the traceback, redacted as every error text is.
            logging.getLogger("soulacy.http").error(
                "run %s of agent %r failed: %s",
                run_id,
                run.agent_id,
                redact_text("".join(traceback.format_exception(exc)).rstrip()),
                # whose run it is: a support bundle shows the record to that principal only
                extra={"soulacy_principal": principal, "soulacy_run_id": run_id},
            )
            if not log.finished:  # failed before its terminal event: still end with a result
                log.append(
                    "result",
                    {
                        "reply": "",
                        "run_id": run_id,
                        "session_id": session_id,
                        "status": "failed",
                        "verification": "unverified",
                        "metadata": {"error": redact_text(str(exc)), "status": "failed"},
                    },
                )
        finally:
            if not log.finished and self.kernel.stopping.is_set():
                # Stopped without its terminal event: its streams still learn that it
                # stopped, and how to go on.
                log.append("result", _interrupted(run_id, session_id))
            self._live.discard(run_id)
            if self._quiet is not None:
                self._quiet.set()
                self._quiet = None

    async def chat(self, request: Request, *, continues: bool = False) -> None:
        log, deadline = await self._start(request, continues=continues)
        with trio.move_on_after(deadline):
            while not log.finished:
                await log.changed.wait()
        if log.result is None:
            raise HttpError(
                504,
                f"the HTTP deadline passed; run {log.run_id!r} goes on:"
                f" GET {PREFIX}/runs/{log.run_id}",
            )
        result = dict(log.result.data)
        self._refuse_as_http(result, log.run_id, request.principal)
        headers = self._token_header(log.run_id, request.principal)
        await send_json(request.send, 200, result, headers)

    def _refuse_as_http(self, result: dict[str, Any], run_id: str, principal: str | None) -> None:
        """Raise the HTTP answer of a run that ended before anything of it was stored (a
        store outage, a continuation taken elsewhere, a run id that is another request's)."""
        if _failed_on_the_store(result):  # an outage: retry the same run id once it is over
            raise self.store_status.run_failed(result)
        if _not_continuable(result):  # continued elsewhere meanwhile: nothing of it stored
            raise HttpError(409, str(result.get("metadata", {}).get("error") or "not continuable"))
        differs = _refused_as_another_requests(result)
        if differs is not None:  # its id was another request's: nothing of it was stored
            if "principal" in differs and not self.principals.sees_everything(principal):
                raise HttpError(404, f"no run {run_id!r}")  # another principal's
            raise _run_id_taken(run_id, differs)

    async def chat_stream(self, request: Request, *, continues: bool = False) -> None:
        with ExitStack() as slot:
            # The stream's place is taken once the request is found valid, just before its
            # run is reserved: a request refused for it starts no run.
            log, deadline = await self._start(
                request,
                lambda: slot.enter_context(self.streams.take(request.principal)),
                continues=continues,
            )
            # The headers wait for the run's first event: a fresh run id is claimed in the
            # store before it, so a request that lost the id to another (on any process) is
            # answered 409 or 404 as /chat is, not with a stream that ends failed. A run
            # queued behind its conversation's lease gets its headers after a short wait.
            waited = trio.current_time()
            with trio.move_on_after(min(deadline, STARTED_WAIT)):
                while log.next_id == 1:
                    await log.changed.wait()
            deadline -= trio.current_time() - waited
            if log.result is not None:
                self._refuse_as_http(dict(log.result.data), log.run_id, request.principal)
            headers = self._token_header(log.run_id, request.principal)
            await self._stream(request, log, 0, deadline, headers)

    async def continue_run(self, request: Request) -> None:
        """Continue an incomplete run in place and answer as ``/chat`` does."""
        await self.chat(request, continues=True)

    async def continue_stream(self, request: Request) -> None:
        """Continue an incomplete run in place and stream it as ``/chat/stream`` does."""
        await self.chat_stream(request, continues=True)

    async def issue_token(self, request: Request) -> None:
        run_id = request.params["run_id"]
        log = self.logs.get(run_id)
        owner = log.principal if log is not None else None
        if log is None:
            stored = await self.kernel.store().get_run(run_id)
            owner = stored.principal if stored is not None else None
            if stored is None:
                raise HttpError(404, f"no run {run_id!r}")
        if not self._visible(owner, request) or request.principal is None:
            raise HttpError(404, f"no run {run_id!r}")
        key = self.principals.keys[request.principal]
        token, expires = self.tokens.issue(run_id, request.principal, key)
        await send_json(
            request.send,
            200,
            {
                "run_id": run_id,
                "token": token,
                "expires_at": expires,
                "expires_in": self.tokens.lifetime,
            },
            {"cache-control": "no-store"},
        )

    async def events(self, request: Request) -> None:
        run_id = request.params["run_id"]
        last_id = last_event_id(request.headers)
        log = self.logs.get(run_id)
        if log is not None and self._visible(log.principal, request):
            if log.result is not None and last_id >= log.result.id:
                await send_empty(request.send, 204)  # seen the end: EventSource stops here
                return
            with self.streams.take(request.principal, request.token_run):
                await self._stream(request, log, last_id, math.inf)
            return
        store = self.kernel.store()
        stored = await store.get_run(run_id)
        shared = await store.run_events(run_id, last_id, PAGE) if self.shared else None
        if shared is not None and stored is None:  # its run record not written yet
            stored = RunRecord(run_id, "", "", principal=shared.principal, status="running")
        if (
            stored is None
            or not self._visible(stored.principal, request)
            or (shared is not None and not self._visible(shared.principal, request))
        ):
            raise HttpError(404, f"no run {run_id!r}")
        if last_id >= REPLAYED_RESULT_ID:
            await send_empty(request.send, 204)
            return
        if shared is None and self.shared and stored.status == "running":
            shared = RunEvents(run_id, stored.principal, last_id + 1, [])  # none written yet
        if shared is not None:  # another process runs it, or ran it: its events are shared
            if not shared.events and await self._ended_at(run_id, last_id):
                await send_empty(request.send, 204)  # seen the end
                return

            async def final() -> dict[str, Any] | None:
                record = await store.get_run(run_id)
                if record is not None and record.status == "running":
                    return None
                return {"id": REPLAYED_RESULT_ID, "data": _replayed(record or stored)}

            pump = partial(pump_stored, store=store, found=shared, final=final)
            with self.streams.take(request.principal, request.token_run):
                await self._stream(request, None, last_id, math.inf, pump=pump)
            return
        # A run from before a restart: its terminal event is rebuilt from the store.
        await _sse_start(request)
        body = sse(REPLAYED_RESULT_ID, "result", _replayed(stored))
        await request.send({"type": "http.response.body", "body": body})

    async def _ended_at(self, run_id: str, last_id: int) -> bool:
        """Whether the event ``last_id`` of a stored log is its ``result``."""
        around = await self.kernel.store().run_events(run_id, last_id - 1, 1)
        return bool(around and around.events and around.events[0].name == "result")

    async def _stream(
        self,
        request: Request,
        log: RunLog | None,
        last_id: int,
        deadline: float,
        headers: dict[str, str] | None = None,
        pump: Callable[..., Awaitable[None]] | None = None,
    ) -> None:
        """Stream a run's events after ``last_id``: from this process's ``log``, or with
        ``pump`` (the store's shared copy of a run another process runs)."""
        await _sse_start(request, headers)
        with trio.move_on_after(deadline) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, request.receive, nursery.cancel_scope)
                if log is not None:
                    await pump_log(request.send, log, last_id)
                elif pump is not None:
                    await pump(request.send, last_id=last_id)
                nursery.cancel_scope.cancel()
        if scope.cancelled_caught and log is not None:
            data = {"error": "HTTP deadline passed", "run_id": log.run_id}
            await request.send(
                {"type": "http.response.body", "body": sse(None, DEADLINE_EVENT, data)}
            )
        await request.send({"type": "http.response.body", "body": b""})

    async def cancel(self, request: Request) -> None:
        body: CancelBody = parse(await self._json(request), CancelBody)
        log = self.logs.get(body.run_id)
        if log is None:  # perhaps another process sharing the store runs it
            record = await self.kernel.store().get_run(body.run_id)
            if record is None or not self._visible(record.principal, request):
                raise HttpError(404, f"no run {body.run_id!r}")
            cancelled = await self.kernel.request_cancel(body.run_id)
        elif not self._visible(log.principal, request):
            raise HttpError(404, f"no run {body.run_id!r}")
        else:
            cancelled = False if log.finished else self.kernel.cancel_run(body.run_id)
        await send_json(request.send, 200, {"run_id": body.run_id, "cancelled": cancelled})

    async def history(self, request: Request) -> None:
        session_id = request.params["session_id"]
        store = self.kernel.store()
        entries = await store.history(session_id)
        runs: dict[str | None, RunRecord | None] = {}
        for run_id in {e.run_id for e in entries}:
            runs[run_id] = await store.get_run(run_id) if run_id else None
        visible = [
            label_interrupted(e, runs[e.run_id])
            for e in entries
            if self._visible(_principal_of(runs[e.run_id]), request)
        ]
        if not visible:
            raise HttpError(404, f"no session {session_id!r}")
        await send_json(
            request.send,
            200,
            {"session_id": session_id, "entries": [attrs.asdict(e) for e in visible]},
        )

    async def run(self, request: Request) -> None:
        run_id = request.params["run_id"]
        record = await self.kernel.store().get_run(run_id)
        log = self.logs.get(run_id)
        principal = record.principal if record else (log.principal if log else None)
        if (record is None and log is None) or not self._visible(principal, request):
            raise HttpError(404, f"no run {run_id!r}")
        proof = await self.kernel.store().get_proof(run_id)
        running = (log is not None and not log.finished) or (
            log is None and record is not None and record.status == "running"
        )  # by another process on the store
        body: dict[str, Any] = {"run_id": run_id, "running": running}
        if record is not None:
            body.update(
                status=record.status,
                verification=record.verification,
                incomplete_reason=record.incomplete_reason,
                session_id=record.session_id,
                agent_id=record.agent_id,
                metadata=record.metadata,
                attempt=record.attempt,
                lease=record.lease if record.status == "interrupted" else None,
            )
        body["proof"] = {"sha256": proof.sha256, **proof.data()} if proof else None
        await send_json(request.send, 200, body)

    async def agents(self, request: Request) -> None:
        agents = []
        for agent_id in self.kernel.agent_ids():
            agent = self.kernel.agent(agent_id)
            agents.append(
                {
                    "id": agent_id,
                    "name": agent.section("name"),
                    "description": agent.section("description"),
                    "enabled": agent.section("enabled"),
                }
            )
        await send_json(request.send, 200, {"agents": agents})

    async def preparation(self, request: Request) -> None:
        agent_id = request.params["agent_id"]
        if agent_id not in self.kernel.agent_ids():
            raise HttpError(404, f"no agent {agent_id!r}")
        policy = self.kernel.resolve_policy(agent_id)
        await send_json(request.send, 200, {"agent_id": agent_id, "policy": policy.to_dict()})

    async def get_config(self, request: Request) -> None:
        self._admin(request)
        await send_json(request.send, 200, {"config": redact(self.kernel.config.to_dict())})

    async def patch_config(self, request: Request) -> None:
        self._admin(request)
        body: ConfigPatch = parse(await self._json(request), ConfigPatch)
        # The trust root (keys, admins, hosts, plugins, commands, environment variables, the
        # store, telemetry's destinations and content…), as the plugins that own it declare it.
        kernel = self.kernel
        saved = load_yaml_file(kernel.config_file) if kernel.config_file.is_file() else {}
        refused = trust_root_changes(
            kernel.sections,
            body.changes,
            "workspace",
            aliases=kernel.config.aliases,
            saved=plain(saved),
            kernel=kernel,
        )
        if refused:
            raise HttpError(
                422,
                "invalid configuration; nothing was saved",
                {f"changes.{key}": why for key, why in sorted(refused.items())},
            )
        try:
            changed = self.kernel.update_config(body.changes)
        except ConfigError as exc:
            raise HttpError(
                422,
                "invalid configuration; nothing was saved",
                {issue.path: issue.message for issue in exc.issues},
            ) from None
        await send_json(request.send, 200, {"changed": changed})


class StoreStatus:
    """What the API says of its store: its name in a 503 (``unavailable``), one warning per
    minute of an outage rather than a traceback per request, and the readiness check of
    ``/ready``: one at a time, reused for :data:`READY_EVERY` however many ask, waited for
    :data:`READY_WAIT` at most (a store call cannot be abandoned: a locked SQLite file waits
    its ``busy_timeout``, an unreachable server its ``connect_timeout``)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._checked_at = -math.inf
        self._failed: str | None = None
        self._checking: trio.Event | None = None  # set when the check under way ends
        self._began = -math.inf  # when it began
        self._logged_at = -math.inf
        self._unlogged = 0

    @functools.cached_property
    def name(self) -> str:
        """The plugin that gives the store (``sqlite_store``, ``postgres`` …)."""
        module = type(self.kernel.store()).__module__
        found = []
        for name, plugin in self.kernel.pm.list_name_plugin():
            home = getattr(plugin, "__name__", None)  # a plugin module's; an object has none
            if isinstance(home, str) and (module == home or module.startswith(home + ".")):
                found.append((len(home), name))  # the innermost module that holds the store
        return max(found)[1] if found else type(self.kernel.store()).__name__

    def unavailable(self, exc: StorageError) -> HttpError:
        """The 503 of a request the store failed: what failed is logged, not answered."""
        self._warn(str(exc))
        return HttpError(
            503,
            f"the store ({self.name}) is unavailable; retry later",
            headers={"retry-after": str(STORE_RETRY_AFTER)},
            extra={"store": {"name": self.name, "available": False}},
        )

    def run_failed(self, result: dict[str, Any]) -> HttpError:
        """The 503 of a chat whose run ended ``failed (storage_error)``: the same run id,
        asked again once the store answers, is the run's next attempt."""
        self._warn(str((result.get("metadata") or {}).get("error") or "a run failed on it"))
        run_id = result.get("run_id")
        return HttpError(
            503,
            f"the store ({self.name}) is unavailable: run {run_id!r} failed on it;"
            " retry it (the same run_id) later",
            headers={"retry-after": str(STORE_RETRY_AFTER)},
            extra={
                "store": {"name": self.name, "available": False},
                "run_id": run_id,
                "session_id": result.get("session_id"),
            },
        )

    def _warn(self, cause: str) -> None:
        now = trio.current_time()
        if now - self._logged_at < OUTAGE_LOG_EVERY:
            self._unlogged += 1
            return
        since = f" ({self._unlogged} more answered 503 since the last warning)"
        log.warning(
            "the store (%s) is unavailable; requests get 503 with Retry-After until it answers:"
            " %s%s",
            self.name,
            redact_text(cause),
            since if self._unlogged else "",
        )
        self._logged_at, self._unlogged = now, 0

    async def check(self, nursery: trio.Nursery | None) -> str | None:
        """None when the store answered a read and a write; else what failed: ``read``,
        ``write``, or ``time`` (no answer within :data:`READY_WAIT`). The check runs in
        ``nursery`` (without one: in this task, however long it takes)."""
        if self._checking is None and trio.current_time() - self._checked_at < READY_EVERY:
            return self._failed
        if self._checking is None:  # one check at a time: the others wait for its answer
            self._checking, self._began = trio.Event(), trio.current_time()
            if nursery is None:
                await self._check()
            else:
                nursery.start_soon(self._check)
        checking = self._checking
        if checking is not None:
            with trio.move_on_at(self._began + READY_WAIT):
                await checking.wait()
            if not checking.is_set():
                self._warn(f"no answer to the readiness check within {READY_WAIT:g} s")
                return "time"
        return self._failed

    async def _check(self) -> None:
        store = self.kernel.store()
        step: str | None = "read"
        try:
            await store.load_state(READY_KEY)
            step = "write"  # a store that reads but cannot write (read-only, locked) is not ready
            await store.save_state(READY_KEY, {"checked_at": time.time()})
            step = None
        except StorageError as exc:
            self._warn(str(exc))
        finally:  # cancelled (the server stops): the step under way counts as failed
            self._failed, self._checked_at = step, trio.current_time()
            checking, self._checking = self._checking, None
            if checking is not None:
                checking.set()


def _run_id_taken(run_id: str, differs: list[str]) -> HttpError:
    """The 409 of a run id that the caller's own stored run (or, in a race, another request
    of the caller's) holds, as for a live run (``RunIdInUse``)."""
    return HttpError(
        409,
        f"run {run_id!r} belongs to another request ({', '.join(differs)} differ); retry with"
        " the same request or use a new run id",
    )


def _refused_as_another_requests(result: dict[str, Any]) -> list[str] | None:
    """What differs from the request that holds the run id, when the run was refused because
    the id is another request's (the engine's ``identity_mismatch``: nothing of it stored, in a
    race with another process too); None for any other ending."""
    metadata = result.get("metadata") or {}
    if result.get("status") != "failed" or metadata.get("incomplete_reason") != (
        "identity_mismatch"
    ):
        return None
    differs = (metadata.get("evidence") or {}).get("differs")
    return [str(d) for d in differs] if isinstance(differs, list) else []


def _not_continuable(result: dict[str, Any]) -> bool:
    """A continuation the engine refused under the run's lease (another continued it first)."""
    metadata = result.get("metadata") or {}
    return result.get("status") == "failed" and metadata.get("incomplete_reason") == (
        "not_continuable"
    )


def _failed_on_the_store(result: dict[str, Any]) -> bool:
    metadata = result.get("metadata") or {}
    return result.get("status") == "failed" and metadata.get("incomplete_reason") == (
        "storage_error"
    )


def _only_storage_errors(group: BaseExceptionGroup[BaseException]) -> StorageError | None:
    """The first StorageError of ``group`` when it holds nothing else, else None."""
    outages, rest = group.split(StorageError)
    if outages is None or rest is not None:
        return None
    first: BaseException = outages
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first if isinstance(first, StorageError) else None


def _capacity(exc: CapacityError) -> HttpError:
    key = CAPACITY_KEYS.get(exc.scope, "runtime.max_concurrent_sessions")
    retry = str(max(1, math.ceil(exc.retry_after)))
    return HttpError(
        429,
        str(exc),
        headers={"retry-after": retry},
        extra={"limit": {"scope": exc.scope, "max": exc.limit, "key": key}},
    )


def _query(query: str, name: str) -> str | None:
    values = urllib.parse.parse_qs(query, keep_blank_values=True).get(name)
    return values[-1] if values else None


async def _sse_start(request: Request, headers: dict[str, str] | None = None) -> None:
    request.streaming = True
    raw = [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await request.send({"type": "http.response.start", "status": 200, "headers": raw})


def _replayed(stored: RunRecord) -> dict[str, Any]:
    """The terminal event of a run whose log is gone (a restart) or whose process died,
    rebuilt from its record."""
    return {
        "reply": "",
        "run_id": stored.run_id,
        "session_id": stored.session_id,
        "status": stored.status,
        "verification": stored.verification,
        "metadata": dict(stored.metadata or {"status": stored.status}),
        "replayed_from_store": True,
    }


def _interrupted(run_id: str, session_id: str) -> dict[str, Any]:
    """The ``result`` of a run this stopping server leaves unfinished and resumable."""
    metadata = {
        "run_id": run_id,
        "session_id": session_id,
        "status": "interrupted",
        "incomplete_reason": SHUTDOWN,
    }
    return {
        "reply": "",
        "run_id": run_id,
        "session_id": session_id,
        "status": "interrupted",
        "verification": "unverified",
        "metadata": metadata,
    }


def _principal_of(run: RunRecord | None) -> str | None:
    return run.principal if run else None


async def pump_log(send: Send, log: RunLog, last_id: int) -> None:
    """Stream the events of this process's ``log`` after ``last_id`` until its ``result``:
    what came since the last write in one ``send()``, a keep-alive comment when quiet."""
    busy = streaming = False
    while True:
        if busy:  # the run outpaces this stream: let it add what it has ready, write once
            await gathered(log, last_id)
        changed = log.changed
        missed, events = log.after(last_id)
        chunk = b""
        if missed:
            chunk += sse(
                None,
                "gap",
                {"missed": missed, "reason": "events dropped from the run's bounded log"},
            )
        if events:
            chunk += b"".join([e.frame or frame_of(e) for e in events])  # encoded once; one send
            last_id = events[-1].id
            streaming = streaming or any(e.name == "delta" for e in events)
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if log.result is not None and last_id >= log.result.id:
            return
        # More came while this chunk was sent: the run outpaces the writes. Not before the
        # reply streams: its first token goes with no wait, whatever came just before it.
        busy = changed.is_set() and streaming
        if changed.is_set():
            continue
        with trio.move_on_after(KEEPALIVE) as quiet:
            await changed.wait()
        if quiet.cancelled_caught:
            await send(
                {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
            )


async def _send_streamed(request: Request, answer: HttpResponse, route: str) -> None:
    """A contributed route's streamed answer (``HttpResponse.streamed``), chunk by chunk until
    its producer returns or the client disconnects."""
    raw = [(k.lower().encode(), v.encode()) for k, v in answer.headers.items()]
    raw = [(k, v) for k, v in raw if k != b"content-length"]
    request.streaming = True
    await request.send({"type": "http.response.start", "status": answer.status, "headers": raw})

    async def write(chunk: bytes) -> None:
        await request.send({"type": "http.response.body", "body": chunk, "more_body": True})

    assert answer.stream is not None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_disconnect, request.receive, nursery.cancel_scope)
        try:
            await answer.stream(write)
        except Exception as exc:  # begun: no error answer can follow; the stream just ends
            import logging
            import traceback

            logging.getLogger("soulacy.http").error(
                "the stream of %s failed: %s",
                route,
                redact_text("".join(traceback.format_exception(exc)).rstrip()),
                extra={"soulacy_principal": request.principal},
            )
        nursery.cancel_scope.cancel()
    await request.send({"type": "http.response.body", "body": b""})


async def _cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    # hypercorn drops what is sent after the client left: stop producing instead.
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
