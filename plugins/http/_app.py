"""The HTTP API under /api/v1: chat (JSON and SSE), cancel, history, runs, agents, config."""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from soulacy.kernel import ConfigError, Kernel, UsageError, redact, structure

from ._asgi import HttpError, Receive, Request, Send, send_json, sse
from ._config import ServerConfig
from ._runlog import RunLog, RunLogs

PREFIX = "/api/v1"
OPENAPI = Path(__file__).with_name("openapi.json")
LOCAL = "local"  # the principal of loopback clients when no API key is configured
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream
_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")  # no "/": ids appear in URL paths

Handler = Callable[[Request], Awaitable[None]]


@attrs.frozen
class ChatBody:
    agent_id: str
    text: str
    session_id: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    overrides: dict[str, Any] | None = None


@attrs.frozen
class CancelBody:
    run_id: str


@attrs.frozen
class ConfigPatch:
    changes: dict[str, Any]


def _fields(error: ConfigError, key: str) -> dict[str, str]:
    return {
        issue.path.removeprefix(f"{key}.").removeprefix(key) or key: issue.message
        for issue in error.issues
    }


def parse(data: Any, type_: Any) -> Any:
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


class Api:
    def __init__(self, kernel: Kernel, config: ServerConfig, logs: RunLogs) -> None:
        self.kernel = kernel
        self.config = config
        self.logs = logs
        self.runs: trio.Nursery | None = None  # where runs execute, apart from requests
        self._tokens = [(p, k.encode()) for p, k in config.api_keys.items()]
        self.routes: list[tuple[str, re.Pattern[str], Handler, bool]] = [
            ("GET", re.compile(r"/health"), self.health, False),
            ("GET", re.compile(r"/openapi\.json"), self.openapi, False),
            ("POST", re.compile(r"/chat"), self.chat, True),
            ("POST", re.compile(r"/chat/stream"), self.chat_stream, True),
            ("POST", re.compile(r"/chat/cancel"), self.cancel, True),
            ("GET", re.compile(r"/history/(?P<session_id>[^/]+)"), self.history, True),
            ("GET", re.compile(r"/runs/(?P<run_id>[^/]+)"), self.run, True),
            ("GET", re.compile(r"/runs/(?P<run_id>[^/]+)/events"), self.events, True),
            ("GET", re.compile(r"/agents"), self.agents, True),
            ("GET", re.compile(r"/agents/(?P<agent_id>[^/]+)/preparation"), self.preparation, True),
            ("GET", re.compile(r"/config"), self.get_config, True),
            ("PATCH", re.compile(r"/config"), self.patch_config, True),
        ]

    # -- ASGI ----------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"unsupported ASGI scope {scope['type']!r}")
        request = Request.from_scope(scope, receive, send)
        try:
            handler = self._route(request)
            await handler(request)
        except HttpError as exc:
            await send_json(send, exc.status, exc.body())
        except ConfigError as exc:
            await send_json(
                send,
                422,
                {"error": "invalid request", "status": 422, "fields": _fields(exc, "overrides")},
            )
        except UsageError as exc:
            await send_json(send, 400, {"error": str(exc), "status": 400})

    def _route(self, request: Request) -> Handler:
        if not request.path.startswith(PREFIX):
            raise HttpError(404, "not found")
        path = request.path[len(PREFIX) :]
        allowed = []
        for method, pattern, handler, needs_auth in self.routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if method != request.method:
                allowed.append(method)
                continue
            request.params = match.groupdict()
            if needs_auth:
                request.principal = self._principal(request)
            return handler
        if allowed:
            raise HttpError(405, f"method not allowed (allowed: {', '.join(allowed)})")
        raise HttpError(404, "not found")

    def _principal(self, request: Request) -> str:
        """Bearer tokens map to principals; without keys, only loopback clients are served."""
        if not self._tokens:
            if _loopback(request.client):
                return LOCAL
            raise HttpError(403, "no API key is configured, so only loopback clients are served")
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        found = None
        for principal, key in self._tokens:  # compare with every key: constant time per key
            if hmac.compare_digest(token.strip().encode(), key) and scheme.lower() == "bearer":
                found = principal
        if found is None:
            raise HttpError(401, "missing or invalid bearer token")
        return found

    def _admin(self, request: Request) -> None:
        if request.principal == LOCAL or request.principal in self.config.admins:
            return
        raise HttpError(403, "this principal may not read or change the configuration")

    # -- handlers --------------------------------------------------------------------------

    async def health(self, request: Request) -> None:
        await send_json(request.send, 200, {"status": "ok"})

    async def openapi(self, request: Request) -> None:
        await send_json(request.send, 200, json.loads(OPENAPI.read_text()))

    async def _start(self, request: Request) -> tuple[RunLog, float]:
        body: ChatBody = parse(await request.json(self.config.max_body_bytes), ChatBody)
        _check_id("run_id", body.run_id)
        _check_id("session_id", body.session_id)
        try:
            agent = self.kernel.agent(body.agent_id)
        except ConfigError:
            raise
        except UsageError:
            raise HttpError(404, f"no agent {body.agent_id!r}") from None
        if not agent.section("enabled"):
            raise HttpError(409, f"agent {body.agent_id!r} is disabled")
        policy = self.kernel.resolve_policy(body.agent_id, body.overrides or {})
        run_id = body.run_id or uuid.uuid4().hex
        current = self.logs.get(run_id)
        stored = (
            None
            if current is not None
            else (await self.kernel.conversation_store().get_run(run_id))
        )
        owner = (
            current.principal
            if current is not None
            else (stored.principal if stored else request.principal)
        )
        if not self._visible(owner, request):
            raise HttpError(404, f"no run {run_id!r}")  # another principal's: not confirmed
        if current is not None and not current.finished:
            raise HttpError(409, f"run {run_id!r} is still running")
        log = self.logs.open(run_id, request.principal)
        session_id = body.session_id or uuid.uuid4().hex
        assert self.runs is not None
        self.runs.start_soon(self._execute, body, run_id, session_id, request.principal, log)
        deadline = policy.http_timeout.value
        return log, math.inf if deadline is None else float(deadline)

    async def _execute(
        self, body: ChatBody, run_id: str, session_id: str, principal: str | None, log: RunLog
    ) -> None:
        try:
            await self.kernel.run(
                body.agent_id,
                body.text,
                session_id=session_id,
                run_id=run_id,
                user_id=body.user_id,
                principal=principal,
                overrides=body.overrides or {},
                stream=True,
            )
        except Exception as exc:  # one run's failure must never take the server down
            if not log.finished:  # failed before its terminal event: still end with a result
                log.append(
                    "result",
                    {
                        "reply": "",
                        "run_id": run_id,
                        "session_id": session_id,
                        "status": "failed",
                        "verification": "unverified",
                        "metadata": {"error": str(exc), "status": "failed"},
                    },
                )

    async def chat(self, request: Request) -> None:
        log, deadline = await self._start(request)
        with trio.move_on_after(deadline):
            while not log.finished:
                await log.changed.wait()
        if log.result is None:
            raise HttpError(
                504,
                f"the HTTP deadline passed; run {log.run_id!r} goes on:"
                f" GET {PREFIX}/runs/{log.run_id}",
            )
        await send_json(request.send, 200, dict(log.result.data))

    async def chat_stream(self, request: Request) -> None:
        log, deadline = await self._start(request)
        await self._stream(request, log, 0, deadline)

    async def events(self, request: Request) -> None:
        run_id = request.params["run_id"]
        last = request.headers.get("last-event-id", "0")
        last_id = int(last) if last.isdigit() else 0
        log = self.logs.get(run_id)
        if log is not None and self._visible(log.principal, request):
            await self._stream(request, log, last_id, math.inf)
            return
        stored = await self.kernel.conversation_store().get_run(run_id)
        if stored is None or not self._visible(stored.principal, request):
            raise HttpError(404, f"no run {run_id!r}")
        # A run from before a restart: its terminal event is rebuilt from the store.
        meta = dict(stored.metadata or {"status": stored.status})
        result = {
            "reply": "",
            "run_id": run_id,
            "session_id": stored.session_id,
            "status": stored.status,
            "verification": stored.verification,
            "metadata": meta,
            "replayed_from_store": True,
        }
        await _sse_start(request.send)
        await request.send({"type": "http.response.body", "body": sse(None, "result", result)})

    async def _stream(self, request: Request, log: RunLog, last_id: int, deadline: float) -> None:
        await _sse_start(request.send)
        with trio.move_on_after(deadline) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, request.receive, nursery.cancel_scope)
                await self._pump(request.send, log, last_id)
                nursery.cancel_scope.cancel()
        if scope.cancelled_caught:
            await request.send(
                {
                    "type": "http.response.body",
                    "body": sse(None, "error", {"error": "HTTP deadline passed"}),
                }
            )
        await request.send({"type": "http.response.body", "body": b""})

    async def _pump(self, send: Send, log: RunLog, last_id: int) -> None:
        while True:
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
                chunk += b"".join(sse(e.id, e.name, e.data) for e in events)  # one send
                last_id = events[-1].id
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if log.result is not None and last_id >= log.result.id:
                return
            with trio.move_on_after(KEEPALIVE) as quiet:
                await changed.wait()
            if quiet.cancelled_caught:
                await send(
                    {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
                )

    async def cancel(self, request: Request) -> None:
        body: CancelBody = parse(await request.json(self.config.max_body_bytes), CancelBody)
        log = self.logs.get(body.run_id)
        if log is None or not self._visible(log.principal, request):
            raise HttpError(404, f"no run {body.run_id!r}")
        cancelled = False if log.finished else self.kernel.cancel_run(body.run_id)
        await send_json(request.send, 200, {"run_id": body.run_id, "cancelled": cancelled})

    async def history(self, request: Request) -> None:
        session_id = request.params["session_id"]
        store = self.kernel.conversation_store()
        entries = await store.history(session_id)
        owners: dict[str | None, str | None] = {}
        for run_id in {e.run_id for e in entries}:
            record = await store.get_run(run_id) if run_id else None
            owners[run_id] = record.principal if record else None
        visible = [e for e in entries if self._visible(owners[e.run_id], request)]
        if not visible:
            raise HttpError(404, f"no session {session_id!r}")
        await send_json(
            request.send,
            200,
            {"session_id": session_id, "entries": [attrs.asdict(e) for e in visible]},
        )

    async def run(self, request: Request) -> None:
        run_id = request.params["run_id"]
        record = await self.kernel.conversation_store().get_run(run_id)
        log = self.logs.get(run_id)
        principal = record.principal if record else (log.principal if log else None)
        if (record is None and log is None) or not self._visible(principal, request):
            raise HttpError(404, f"no run {run_id!r}")
        proof = await self.kernel.proof_store().get_proof(run_id)
        body: dict[str, Any] = {"run_id": run_id, "running": log is not None and not log.finished}
        if record is not None:
            body.update(
                status=record.status,
                verification=record.verification,
                incomplete_reason=record.incomplete_reason,
                session_id=record.session_id,
                agent_id=record.agent_id,
                metadata=record.metadata,
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
        body: ConfigPatch = parse(await request.json(self.config.max_body_bytes), ConfigPatch)
        try:
            changed = self.kernel.update_config(body.changes)
        except ConfigError as exc:
            raise HttpError(
                422,
                "invalid configuration; nothing was saved",
                {issue.path: issue.message for issue in exc.issues},
            ) from None
        await send_json(request.send, 200, {"changed": changed})

    def _visible(self, owner: str | None, request: Request) -> bool:
        """A principal sees its own runs; loopback without keys (LOCAL) sees everything."""
        return request.principal == LOCAL or (owner is not None and owner == request.principal)


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _sse_start(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ],
        }
    )


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
