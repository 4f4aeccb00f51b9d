"""The A2A server: agent cards and the JSON-RPC methods of A2A 1.0, as routes of the HTTP plugin.

- ``GET /.well-known/agent-card.json``: the workspace's card; each agent the caller may use is
  a skill, with an interface of its own.
- ``GET /api/v1/a2a/{agent_id}/.well-known/agent-card.json``: one agent's card.
- ``POST /api/v1/a2a/{agent_id}``: ``SendMessage``, ``SendStreamingMessage``, ``GetTask``,
  ``ListTasks``, ``CancelTask``, ``SubscribeToTask``, the push notification config methods
  (``_push.py``), and the 0.3 twins of the first six but ``ListTasks`` (``_v03.py`` translates
  the shapes).

Every route needs a key (``auth="key"``): the caller's principal owns the runs it starts, and
another principal's task reads as no task at all (nor listed, nor its context continued: the same
context id is another principal's own conversation). A streamed answer sends each task event as
it happens (``HttpResponse.streamed``), the reply's text as chunks of its artifact.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import trio

from soulacy.kernel import AgentSpec, CapacityError, ConfigError, Kernel, RunIdInUse, UsageError
from soulacy.kernel.store import EVERY_PRINCIPAL, RunRecord
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse, StreamWriter

from . import _v03 as v03
from . import _wire as wire
from ._push import read_config
from ._skills import A2aConfig, skills_of
from ._tasks import CANCEL_REASON, KernelClosed, TaskLog, Tasks

CARD_PATH = "/.well-known/agent-card.json"
RPC_PATH = "/a2a/(?P<agent_id>[^/]+)"
AGENT_CARD_PATH = RPC_PATH + r"/\.well-known/agent-card\.json"
API_PREFIX = "/api/v1"
PAGE_SIZE = 50  # ListTasks' page by default, and at most (A2A 1.0's bounds)
MAX_PAGE_SIZE = 100
LISTED_RUNS = 1000  # ListTasks reads the caller's newest runs of the agent, this many at most
CANCEL_WAIT = 30.0  # seconds a CancelTask waits for its run to end before answering its state
RETRY_AFTER = "5"
CAPABILITIES = {"streaming": True, "extendedAgentCard": False}

Method = Callable[["Call"], Awaitable["HttpResponse | dict[str, Any]"]]


def soulacy_version() -> str:
    try:
        return version("soulacy")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0"


def usable_agents(kernel: Kernel) -> list[AgentSpec]:
    """Every valid, enabled agent of the workspace: agents are the workspace's, offered to
    every principal (as ``GET /agents`` and ``/mcp`` offer them); runs are a principal's."""
    found = []
    for agent_id in kernel.agent_ids():
        if not wire.ID.fullmatch(agent_id):
            continue
        try:
            agent = kernel.agent(agent_id)
        except (UsageError, ConfigError):
            continue  # an invalid SOUL.yaml: `soulacy config validate` says why
        if agent.section("enabled") is not False:
            found.append(agent)
    return found


def base_url(request: HttpRequest) -> str:
    """The server's URL as the caller reached it (its Host passed the HTTP plugin's allow-list)."""
    scheme = "https" if request.headers.get("x-forwarded-proto") == "https" else "http"
    return f"{scheme}://{request.headers.get('host', 'localhost')}"


def interface(
    request: HttpRequest, agent_id: str, version: str = wire.PROTOCOL_VERSION
) -> dict[str, str]:
    return {
        "url": f"{base_url(request)}{API_PREFIX}/a2a/{agent_id}",
        "protocolBinding": wire.BINDING,
        "protocolVersion": version,
    }


def security() -> dict[str, Any]:
    """The card's security: the HTTP API's bearer keys."""
    scheme = {
        "httpAuthSecurityScheme": {"scheme": "Bearer", "description": "a server.api_keys key"}
    }
    return {
        "securitySchemes": {"bearer": scheme},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
    }


def capabilities(kernel: Kernel) -> dict[str, Any]:
    config: A2aConfig = kernel.config.section("a2a")
    return {**CAPABILITIES, "pushNotifications": bool(config.push_urls)}


def card_of(agent: AgentSpec, request: HttpRequest, kernel: Kernel) -> dict[str, Any]:
    name = agent.section("name") or agent.id
    return {
        "name": name,
        "description": agent.section("description") or f"The agent {name!r} of a Soulacy workspace",
        # 1.0 first (clients prefer it); 0.3's methods are served at the same URL.
        "supportedInterfaces": [interface(request, agent.id), interface(request, agent.id, "0.3")],
        "version": soulacy_version(),
        "capabilities": capabilities(kernel),
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills_of(agent),
        **security(),
    }


class Call:
    """One JSON-RPC request to an agent's endpoint: ``method`` as asked, ``served`` the 1.0
    method that answers it (``legacy``: a 0.3 method, its shapes translated)."""

    def __init__(
        self, request: HttpRequest, agent: AgentSpec, rpc_id: Any, method: str, params: Any
    ) -> None:
        self.request, self.agent, self.rpc_id, self.method = request, agent, rpc_id, method
        self.legacy = method in v03.METHODS
        self.served = v03.METHODS.get(method, method)
        if self.legacy:
            params = v03.params(method, params)
        if not isinstance(params, Mapping):
            raise wire.invalid_params("params", "expected an object")
        self.params: Mapping[str, Any] = params

    def result(self, answer: Mapping[str, Any]) -> dict[str, Any]:
        return v03.result(self.method, answer) if self.legacy else dict(answer)

    def event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        return v03.event(event) if self.legacy else dict(event)


class A2aServer:
    """The A2A routes of one kernel."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.tasks = Tasks(kernel)
        self.methods: dict[str, Method] = {
            "SendMessage": self.send_message,
            "SendStreamingMessage": self.send_streaming_message,
            "GetTask": self.get_task,
            "CancelTask": self.cancel_task,
            "SubscribeToTask": self.subscribe_to_task,
            "ListTasks": self.list_tasks,
            "CreateTaskPushNotificationConfig": self.create_push_config,
            "GetTaskPushNotificationConfig": self.get_push_config,
            "ListTaskPushNotificationConfigs": self.list_push_configs,
            "DeleteTaskPushNotificationConfig": self.delete_push_config,
        }
        self.not_supported = {
            "GetExtendedAgentCard": "there is no extended agent card: every card is served to"
            " an authenticated caller already",
        }

    # -- cards -----------------------------------------------------------------------------

    async def workspace_card(self, request: HttpRequest) -> HttpResponse:
        agents = usable_agents(self.kernel)
        name = self.kernel.workspace.name or "workspace"
        card = {
            "name": f"Soulacy workspace {name}",
            "description": (
                "The agents of a Soulacy workspace: each skill is an agent, served at its own"
                " interface (in the order of the skills) and described by its own card at"
                f" {API_PREFIX}/a2a/<agent_id>{CARD_PATH}"
            ),
            "supportedInterfaces": [interface(request, a.id) for a in agents],
            "version": soulacy_version(),
            "capabilities": capabilities(self.kernel),
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {
                    "id": a.id,
                    "name": a.section("name") or a.id,
                    "description": a.section("description") or f"the agent {a.id!r}",
                    "tags": sorted({tag for skill in skills_of(a) for tag in skill["tags"]}),
                }
                for a in agents
            ],
            **security(),
        }
        return HttpResponse.json(card)

    async def agent_card(self, request: HttpRequest) -> HttpResponse:
        agent = self._agent(request.params["agent_id"])
        return HttpResponse.json(card_of(agent, request, self.kernel))

    def _agent(self, agent_id: str) -> AgentSpec:
        """The enabled, valid agent ``agent_id`` of the workspace (its id never reaches the file
        system unless the workspace has it), else a 404."""
        if wire.ID.fullmatch(agent_id) and agent_id in self.kernel.agent_ids():
            try:
                agent = self.kernel.agent(agent_id)
            except (UsageError, ConfigError):
                agent = None  # an invalid SOUL.yaml: `soulacy config validate` says why
            if agent is not None and agent.section("enabled") is not False:
                return agent
        raise HttpError(404, f"no agent {agent_id!r} is served over A2A")

    # -- JSON-RPC --------------------------------------------------------------------------

    async def rpc(self, request: HttpRequest) -> HttpResponse:
        agent = self._agent(request.params["agent_id"])
        body = await request.json()
        rpc_id = body.get("id") if isinstance(body, Mapping) else None
        try:
            call = self._call(request, agent, body)
            answer = await self.methods[call.served](call)
        except wire.RpcError as exc:
            # A stream's error too: found before it begins, it is a JSON answer (as the SDK's
            # own server answers one).
            return HttpResponse.json(wire.error_response(rpc_id, exc))
        if isinstance(answer, HttpResponse):
            return answer
        return HttpResponse.json(wire.response(rpc_id, call.result(answer)))

    def _call(self, request: HttpRequest, agent: AgentSpec, body: Any) -> Call:
        if isinstance(body, list):
            raise wire.RpcError(wire.INVALID_REQUEST, "invalid request: batches are not served")
        if not isinstance(body, Mapping) or body.get("jsonrpc") != "2.0":
            raise wire.RpcError(
                wire.INVALID_REQUEST, "invalid request: jsonrpc: expected a JSON-RPC 2.0 request"
            )
        method = body.get("method")
        if not isinstance(method, str):
            raise wire.RpcError(wire.INVALID_REQUEST, "invalid request: method: expected a string")
        _check_version(request, method)
        if method in v03.NOT_SERVED and "push" in method.lower():
            raise wire.RpcError(
                wire.PUSH_NOT_SUPPORTED,
                f"{method}: push notifications are served in A2A 1.0 only"
                f" ({v03.NOT_SERVED[method]})",
            )
        method = v03.NOT_SERVED.get(method, method)
        if method in self.not_supported:
            code = wire.PUSH_NOT_SUPPORTED if "Push" in method else wire.UNSUPPORTED_OPERATION
            raise wire.RpcError(code, f"{method}: {self.not_supported[method]}")
        if "PushNotification" in method and not self.push_urls():
            raise wire.RpcError(
                wire.PUSH_NOT_SUPPORTED,
                f"{method}: push notifications are off: the operator lists the URLs they may go"
                " to in config.yaml a2a.push_urls",
            )
        if method not in self.methods and method not in v03.METHODS:
            raise wire.RpcError(
                wire.METHOD_NOT_FOUND,
                f"method not found: {method!r}: expected one of {', '.join(self.methods)}"
                f" (A2A 1.0) or {', '.join(v03.METHODS)} (A2A 0.3)",
            )
        if "params" not in body:
            raise wire.invalid_params("params", "expected an object")
        return Call(request, agent, body.get("id"), method, body["params"])

    # -- methods ---------------------------------------------------------------------------

    def _start(self, call: Call) -> tuple[TaskLog, bool]:
        """Start the task a SendMessage asks for; also whether to answer at once."""
        params = call.params
        message = params.get("message")
        text = wire.text_of_message(message)
        assert isinstance(message, Mapping)  # text_of_message checked it
        if message.get("taskId"):
            raise wire.RpcError(
                wire.UNSUPPORTED_OPERATION,
                "message.taskId: a task is one run and takes no further message; send"
                " message.contextId (the task's contextId) to continue its conversation",
                {"field": "message.taskId"},
            )
        context_id = wire.optional_id(message, "contextId", "message.contextId")
        configuration = params.get("configuration") or {}
        if not isinstance(configuration, Mapping):
            raise wire.invalid_params("configuration", "expected an object")
        push = configuration.get("taskPushNotificationConfig")
        if push and not self.push_urls():
            raise wire.RpcError(
                wire.PUSH_NOT_SUPPORTED,
                "configuration.taskPushNotificationConfig: push notifications are off (config.yaml"
                " a2a.push_urls)",
            )
        field = "configuration.taskPushNotificationConfig"
        push_config = read_config(push, "", self.push_urls(), field) if push else None
        at_once = configuration.get("returnImmediately", False)
        if not isinstance(at_once, bool):
            raise wire.invalid_params("configuration.returnImmediately", "expected a boolean")
        modes = configuration.get("acceptedOutputModes") or []
        if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
            raise wire.invalid_params("configuration.acceptedOutputModes", "expected strings")
        if modes and not any(m in ("text/plain", "text/*", "*/*", "text") for m in modes):
            raise wire.RpcError(
                wire.CONTENT_TYPE_NOT_SUPPORTED,
                "configuration.acceptedOutputModes: this agent answers text/plain only",
                {"field": "configuration.acceptedOutputModes"},
            )
        wire.history_length(configuration, "configuration.historyLength")
        if self.kernel.stopping.is_set():
            raise HttpError(
                503,
                "the server is shutting down: it takes no new task; retry on another server",
                headers={"retry-after": RETRY_AFTER},
            )
        request = call.request
        try:
            log = self.tasks.start(call.agent.id, text, message, context_id, request.principal)
        except CapacityError as exc:
            raise HttpError(429, f"the server is at capacity, retry later: {exc}") from None
        except RunIdInUse as exc:  # pragma: no cover - a fresh random id
            raise HttpError(409, str(exc)) from None
        except KernelClosed as exc:
            raise HttpError(503, str(exc), headers={"retry-after": RETRY_AFTER}) from None
        if push_config is not None:
            try:
                self.tasks.push_to(log, {**push_config, "taskId": log.task_id})
            except KernelClosed as exc:  # pragma: no cover - the task's start found it open
                raise HttpError(503, str(exc), headers={"retry-after": RETRY_AFTER}) from None
        return log, at_once

    async def send_message(self, call: Call) -> dict[str, Any]:
        log, at_once = self._start(call)
        if not at_once:
            await _wait_done(log)
        length = wire.history_length(call.params.get("configuration") or {})
        return {"task": log.task(length)}

    async def send_streaming_message(self, call: Call) -> HttpResponse:
        log, _ = self._start(call)
        return await self._stream(call, log, 0)

    async def get_task(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params)
        length = wire.history_length(call.params)
        log = self._visible_log(call, task_id)
        if log is not None:
            return log.task(length)
        return await self._stored_task(call, task_id, length)

    async def list_tasks(self, call: Call) -> dict[str, Any]:
        """The caller's tasks at this agent's endpoint (its runs of this agent, started here or
        through any other route), newest status first, a page at a time; of the newest
        :data:`LISTED_RUNS` runs only."""
        params = call.params
        context_id = wire.optional_id(params, "contextId", "contextId")
        state = wire.task_state(params, "status")
        after = wire.seconds_of(params, "statusTimestampAfter")
        length = wire.history_length(params)
        artifacts = wire.optional_bool(params, "includeArtifacts")
        size = params.get("pageSize")
        if size is None:
            size = PAGE_SIZE
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE_SIZE:
            raise wire.invalid_params(
                "pageSize", f"expected a whole number from 1 to {MAX_PAGE_SIZE}"
            )
        cursor = _page_cursor(params.get("pageToken"))
        request = call.request
        records = await self.kernel.store().list_runs(
            LISTED_RUNS,
            agent_id=call.agent.id,
            principal=EVERY_PRINCIPAL if request.sees_everything else request.principal,
        )
        rows = []
        for record in records:
            log = self.tasks.get(record.run_id)
            found_state = (
                log.state
                if log is not None
                else wire.STATE_OF_STATUS.get(record.status, wire.FAILED)
            )
            moment = _status_seconds(record, log)
            if context_id is not None and record.session_id != context_id:
                continue
            if (state is not None and found_state != state) or (
                after is not None and moment < after
            ):
                continue
            rows.append(((moment, record.run_id), record, log))
        rows.sort(key=lambda row: row[0], reverse=True)
        start = (
            0
            if cursor is None
            else next((i for i, row in enumerate(rows) if row[0] < cursor), len(rows))
        )
        page = rows[start : start + size]
        tasks = []
        for _, record, log in page:
            task = (
                log.task(length)
                if log is not None
                else await stored_task(self.kernel, record, length)
            )
            if not artifacts:
                task.pop("artifacts", None)
            tasks.append(task)
        more = start + size < len(rows)
        return {
            "tasks": tasks,
            "nextPageToken": _page_token(page[-1][0]) if more else "",
            "pageSize": size,
            "totalSize": len(rows),
        }

    # -- push notifications -----------------------------------------------------------------

    def push_urls(self) -> list[str]:
        config: A2aConfig = self.kernel.config.section("a2a")
        return list(config.push_urls)

    def _pushed_log(self, call: Call, task_id: str) -> TaskLog:
        """The caller's task this process runs, whose updates may be pushed."""
        log = self._visible_log(call, task_id)
        if log is None:
            raise _not_found(task_id)  # ended before this process, or another's: none here
        return log

    async def create_push_config(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params, "taskId")
        log = self._pushed_log(call, task_id)
        if log.done:
            raise wire.RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {task_id} is in the terminal state {log.state}: nothing more is pushed",
            )
        config = read_config(call.params, task_id, self.push_urls(), "")
        try:
            self.tasks.push_to(log, config)
        except KernelClosed as exc:
            raise HttpError(503, str(exc), headers={"retry-after": RETRY_AFTER}) from None
        return config

    async def get_push_config(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params, "taskId")
        config_id = wire.required_id(call.params, "id")
        configs = self._pushed_log(call, task_id).push
        found = None if configs is None else configs.configs.get(config_id)
        if found is None:
            raise wire.RpcError(
                wire.TASK_NOT_FOUND,
                f"task {task_id} has no push notification config {config_id!r}",
                {"field": "id"},
            )
        return found

    async def list_push_configs(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params, "taskId")
        configs = self._pushed_log(call, task_id).push
        # At most MAX_CONFIGS of them: one page.
        return {"configs": [] if configs is None else list(configs.configs.values())}

    async def delete_push_config(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params, "taskId")
        config_id = wire.required_id(call.params, "id")
        configs = self._pushed_log(call, task_id).push
        if configs is None or configs.configs.pop(config_id, None) is None:
            raise wire.RpcError(
                wire.TASK_NOT_FOUND,
                f"task {task_id} has no push notification config {config_id!r}",
                {"field": "id"},
            )
        return {}

    async def cancel_task(self, call: Call) -> dict[str, Any]:
        task_id = wire.required_id(call.params)
        log = self._visible_log(call, task_id)
        if log is None:
            stored = await self._stored_task(call, task_id, None)
            if stored["status"]["state"] in wire.TERMINAL:
                raise _not_cancelable(task_id, stored["status"]["state"])
            await self.kernel.request_cancel(task_id, CANCEL_REASON)  # its process cancels it
            return stored
        if log.done:
            raise _not_cancelable(task_id, log.state)
        await self.kernel.request_cancel(task_id, CANCEL_REASON)
        with trio.move_on_after(CANCEL_WAIT):  # a run ends at its next checkpoint
            await _wait_done(log)
        return log.task()

    async def subscribe_to_task(self, call: Call) -> HttpResponse:
        task_id = wire.required_id(call.params)
        log = self._visible_log(call, task_id)
        last_id = _last_event_id(call.request)
        if log is None:
            stored = await self._stored_task(call, task_id, None)
            raise wire.RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {task_id} is in the terminal state {stored['status']['state']} or runs"
                " in another process: GetTask reads it",
            )
        if log.done and last_id is None:
            raise wire.RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {task_id} is in the terminal state {log.state}: GetTask reads it, or"
                " reconnect with Last-Event-ID to get the events missed",
            )
        if last_id is None:  # a new subscriber: the task as it is now, then what follows
            return await self._stream(call, log, len(log.events), first=log.task())
        return await self._stream(call, log, last_id)

    # -- helpers ---------------------------------------------------------------------------

    def _visible_log(self, call: Call, task_id: str) -> TaskLog | None:
        log = self.tasks.get(task_id)
        if log is None:
            return None
        if not call.request.sees(log.principal) or log.agent_id != call.agent.id:
            raise _not_found(task_id)
        return log

    async def _stored_task(self, call: Call, task_id: str, length: int | None) -> dict[str, Any]:
        """A task this process does not keep, read from the store (another process's run, or
        one from before a restart)."""
        record = await self.kernel.store().get_run(task_id)
        if (
            record is None
            or not call.request.sees(record.principal)
            or record.agent_id != call.agent.id
        ):
            raise _not_found(task_id)
        return await stored_task(self.kernel, record, length)

    async def _stream(
        self, call: Call, log: TaskLog, after: int, first: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The task's events after ``after``, each sent as it happens, until the task ends (a
        client that leaves stops its stream, never the task)."""

        async def produce(write: StreamWriter) -> None:
            sent = after
            if first is not None:
                await write(_sse(after, wire.response(call.rpc_id, call.event({"task": first}))))
            while True:
                # Both read before the events: one added meanwhile still wakes this, and an
                # ended task's last events are sent before the stream ends.
                changed, done = log.changed, log.done
                for event_id, event in log.after(sent):
                    await write(_sse(event_id, wire.response(call.rpc_id, call.event(event))))
                    sent = event_id
                if done:
                    return
                await changed.wait()

        return HttpResponse.streamed(produce, SSE_HEADERS)


async def stored_task(kernel: Kernel, record: RunRecord, length: int | None) -> dict[str, Any]:
    """A stored run as a task: its state, its messages in its conversation and its reply."""
    state = wire.STATE_OF_STATUS.get(record.status, wire.FAILED)
    entries = await kernel.store().history(record.session_id, record.agent_id, record.principal)
    history = []
    for entry in entries:
        if entry.run_id != record.run_id or entry.role not in ("user", "assistant"):
            continue
        if entry.role == "assistant" and (entry.tool_calls or not entry.content):
            continue
        role = "ROLE_USER" if entry.role == "user" else "ROLE_AGENT"
        history.append(
            wire.text_message(
                role, entry.content, f"{record.run_id}-{entry.id}", record.session_id, record.run_id
            )
        )
    found: dict[str, Any] = {
        "id": record.run_id,
        "contextId": record.session_id,
        "status": {
            "state": state,
            "timestamp": wire.timestamp(record.finished_at or record.started_at),
        },
        "history": history if length is None else history[-length:] if length else [],
        "metadata": {"agent_id": record.agent_id, **(record.metadata or {})},
    }
    replies = [m for m in history if m["role"] == "ROLE_AGENT"]
    if replies and state == wire.COMPLETED:
        found["artifacts"] = [
            {"artifactId": f"{record.run_id}-reply", "name": "reply", "parts": replies[-1]["parts"]}
        ]
    return found


def _status_seconds(record: RunRecord, log: TaskLog | None) -> float:
    """When the task's status last changed: its end, or its start while it runs."""
    if log is not None and log.done and log.ended_at is not None:
        return log.ended_at
    return record.finished_at or record.started_at


def _page_token(key: tuple[float, str]) -> str:
    """An opaque token naming the last task of a page: the next page begins after it (it stays
    valid when that task changes or leaves, as the SDK's own server does it)."""
    data = json.dumps({"t": key[0], "id": key[1]}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _page_cursor(token: Any) -> tuple[float, str] | None:
    if token is None or token == "":
        return None
    try:
        if not isinstance(token, str):
            raise ValueError(token)
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        moment, task_id = data["t"], data["id"]
        if isinstance(moment, bool) or not isinstance(moment, int | float):
            raise ValueError(moment)
        if not isinstance(task_id, str):
            raise ValueError(task_id)
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise wire.invalid_params(
            "pageToken", "expected the nextPageToken of a ListTasks answer"
        ) from None
    return float(moment), task_id


def _check_version(request: HttpRequest, method: str) -> None:
    """A request's ``A2A-Version`` must be its method's: 1.0's, or 0.3's for 0.3's methods."""
    asked = (request.headers.get(wire.VERSION_HEADER) or "").strip()
    legacy = method in v03.METHODS or method in v03.NOT_SERVED
    accepted = v03.ACCEPTED_VERSIONS if legacy else wire.ACCEPTED_VERSIONS
    if asked and asked not in accepted:
        spoken = v03.VERSION if legacy else wire.PROTOCOL_VERSION
        raise wire.RpcError(
            wire.VERSION_NOT_SUPPORTED,
            f"A2A-Version {asked!r} is not served for {method}, a method of A2A {spoken}",
        )


async def _wait_done(log: TaskLog) -> None:
    while not log.done:
        await log.changed.wait()


def _last_event_id(request: HttpRequest) -> int | None:
    raw = request.headers.get("last-event-id")
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError:
        raise wire.invalid_params("Last-Event-ID", "expected the id of an event") from None
    if value < 0:
        raise wire.invalid_params("Last-Event-ID", "expected the id of an event, 0 or more")
    return value


SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-store"}


def _sse(event_id: int, data: Mapping[str, Any]) -> bytes:
    return f"id: {event_id}\ndata: {json.dumps(data, default=str)}\n\n".encode()


def _not_found(task_id: str) -> wire.RpcError:
    return wire.RpcError(wire.TASK_NOT_FOUND, f"task not found: {task_id}", {"field": "id"})


def _not_cancelable(task_id: str, state: str) -> wire.RpcError:
    return wire.RpcError(
        wire.TASK_NOT_CANCELABLE, f"task {task_id} is in the terminal state {state}: not cancelable"
    )
