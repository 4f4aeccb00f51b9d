"""Remote A2A agents as tools: SOUL.yaml ``a2a_agents.<name>`` is the tool ``a2a__<name>``.

A call sends the tool's ``text`` to the remote agent as one A2A 1.0 message, or 0.3's to an
agent whose card offers only 0.3 (JSON-RPC over httpx: no SDK at run time): streamed
(``SendStreamingMessage``) to an agent whose card says it streams, else answered at once
(``returnImmediately``) and read with ``GetTask`` until it ends. The answer is the reply of the
task it makes; a task that does not complete is a tool error saying its state. A call cut before
its task ended (its run cancelled, its timeout) cancels that task (``CancelTask``): its task id
is known from the first answer. The engine gives these tools what it gives every tool: call ids,
replay of a recorded result instead of a second call, and proof receipts.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import trio

from soulacy.kernel import Tool, current_tool_call

from . import _v03 as v03
from . import _wire as wire

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec

    from ._skills import RemoteAgent

logger = logging.getLogger("soulacy.a2a")

PREFIX = "a2a__"
CANCEL_WAIT = 10.0  # seconds a cut call gives its remote task's CancelTask
POLL_EVERY = (0.5, 1.0, 2.0, 5.0)  # seconds between GetTask polls of a task still working
PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "description": "the request to the agent"},
        "context_id": {
            "type": "string",
            "description": "continue this conversation (the context_id of an earlier answer)",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}


class A2aCallError(Exception):
    """A remote agent's call failed: the error names the agent and what went wrong."""


def remote_tools(agent: AgentSpec) -> list[Tool]:
    remotes: Mapping[str, RemoteAgent] = agent.section("a2a_agents") or {}
    return [
        Tool(
            name=f"{PREFIX}{name}",
            description=remote.description
            or f"Ask the remote A2A agent {name!r} ({remote.url}): send it `text`; its reply"
            " comes back with the context_id that continues the conversation.",
            parameters=PARAMETERS,
            function=RemoteCall(name, remote),
            chosen=True,  # chosen by a2a_agents, with no tools: entry
        )
        for name, remote in remotes.items()
    ]


@attrs.frozen
class Endpoint:
    """Where and how a remote agent is spoken to: its JSON-RPC URL, its A2A version, and
    whether its card says it streams."""

    url: str
    version: str
    streaming: bool = False


@attrs.define
class Sent:
    """The remote task a call made, as far as it is known: its id once answered, and whether it
    has ended (a call cut before then cancels it)."""

    task_id: str | None = None
    ended: bool = False

    def saw(self, task: Mapping[str, Any]) -> None:
        if isinstance(task.get("id"), str) and task["id"]:
            self.task_id = task["id"]
        self.ended = _state(task) not in (wire.SUBMITTED, wire.WORKING)


class RemoteCall:
    """The function of one remote agent's tool; its card is read once."""

    def __init__(self, name: str, remote: RemoteAgent) -> None:
        self.name, self.remote = name, remote
        self.endpoint: Endpoint | None = None
        self.__name__ = f"a2a_{name}"

    async def __call__(self, text: str, context_id: str | None = None) -> str:
        with trio.fail_after(self.remote.timeout):
            async with httpx.AsyncClient(headers=self._headers(), timeout=60) as http:
                endpoint = self.endpoint or await self._endpoint(http)
                self.endpoint = endpoint
                sent = Sent()
                try:
                    return await self._ask(http, endpoint, text, context_id, sent)
                except BaseException:
                    # The call is cut (its run cancelled, its timeout, the server stopping) or
                    # failed before its task ended: nobody will read that task's answer.
                    if sent.task_id is not None and not sent.ended:
                        with trio.CancelScope(shield=True), trio.move_on_after(CANCEL_WAIT):
                            await self._cancel(http, endpoint, sent.task_id)
                    raise

    async def _ask(
        self,
        http: httpx.AsyncClient,
        endpoint: Endpoint,
        text: str,
        context_id: str | None,
        sent: Sent,
    ) -> str:
        if endpoint.streaming:
            result = await self._stream(http, endpoint, text, context_id, sent)
        else:  # answered at once, then read until it ends: its id is known while it runs
            result = await self._send(http, endpoint, text, context_id, at_once=True)
        if "message" in result:  # the agent answered without a task
            sent.ended = True
            return _text(result["message"])
        task = result.get("task")
        if not isinstance(task, Mapping):
            raise A2aCallError(f"{self._who()} answered neither a task nor a message")
        sent.saw(task)
        task = await self._until_ended(http, endpoint, task, sent)
        return self._answer(task)

    def _message(self, endpoint: Endpoint, text: str, context_id: str | None) -> dict[str, Any]:
        # The call's idempotency key names the message: sent again for the same call (a run's
        # retry after a crash), it is the same message, which a server may take once.
        call = current_tool_call()
        message_id = call.idempotency_key if call is not None else uuid.uuid4().hex
        if endpoint.version == v03.VERSION:
            return v03.message_out(text, message_id, context_id)
        message = wire.text_message("ROLE_USER", text, message_id, context_id or "")
        if not context_id:
            del message["contextId"]
        return message

    async def _send(
        self,
        http: httpx.AsyncClient,
        endpoint: Endpoint,
        text: str,
        context_id: str | None,
        *,
        at_once: bool,
    ) -> Mapping[str, Any]:
        """``SendMessage``'s result (a task or a message) in 1.0's shapes, whatever was spoken."""
        message = self._message(endpoint, text, context_id)
        if endpoint.version == v03.VERSION:
            params = {"message": message, "configuration": {"blocking": not at_once}}
            return v03.answer_in(await self._rpc(http, endpoint, "message/send", params))
        params = {"message": message, "configuration": {"returnImmediately": at_once}}
        return await self._rpc(http, endpoint, "SendMessage", params)

    async def _stream(
        self,
        http: httpx.AsyncClient,
        endpoint: Endpoint,
        text: str,
        context_id: str | None,
        sent: Sent,
    ) -> Mapping[str, Any]:
        """``SendStreamingMessage``: the task as its events build it, until it stops working
        (or the stream ends: then it is read with GetTask until it ends)."""
        legacy = endpoint.version == v03.VERSION
        method = "message/stream" if legacy else "SendStreamingMessage"
        body = _request(method, {"message": self._message(endpoint, text, context_id)})
        headers = {wire.VERSION_HEADER: endpoint.version, "accept": "text/event-stream"}
        task: dict[str, Any] | None = None
        try:
            async with http.stream("POST", endpoint.url, json=body, headers=headers) as answer:
                if not answer.headers.get("content-type", "").startswith("text/event-stream"):
                    await answer.aread()  # an error before the stream began is a JSON answer
                    found = self._result(answer, method)
                    return v03.answer_in(found) if legacy else found
                async for data in _sse_data(answer):
                    found = self._result_of(_json_text(data, f"{self._who()}: {method}"), method)
                    event = v03.event_in(found) if legacy else found
                    if "message" in event and task is None:
                        return {"message": event["message"]}
                    task = _apply(task, event)
                    if task is not None:  # read to the stream's end, which the server ends
                        sent.saw(task)
        except httpx.HTTPError as exc:
            if task is None:
                raise A2aCallError(f"{self._who()}: {method}: {exc}") from None
            # The stream broke after the task began: it is read with GetTask.
        if task is None:
            raise A2aCallError(f"{self._who()}: {method}: the stream ended before its task")
        return {"task": task}

    async def _cancel(self, http: httpx.AsyncClient, endpoint: Endpoint, task_id: str) -> None:
        method = "tasks/cancel" if endpoint.version == v03.VERSION else "CancelTask"
        try:
            await self._rpc(http, endpoint, method, {"id": task_id})
        except A2aCallError as exc:  # it may have ended meanwhile: the call ends either way
            logger.info("%s: task %s was not cancelled: %s", self._who(), task_id, exc)

    def _headers(self) -> dict[str, str]:
        headers = {}
        if self.remote.api_key_env:
            key = os.environ.get(self.remote.api_key_env)
            if not key:
                raise A2aCallError(
                    f"{self._who()}: the environment variable {self.remote.api_key_env} (its"
                    " api_key_env) is not set"
                )
            headers["authorization"] = f"Bearer {key}"
        return headers

    def _who(self) -> str:
        return f"remote A2A agent {self.name!r}"

    async def _endpoint(self, http: httpx.AsyncClient) -> Endpoint:
        """The JSON-RPC URL and A2A version of the agent's card (1.0 rather than 0.3): the card
        at ``url`` when it names a card, else at ``url``'s well-known path; an agent without a
        card is served at ``url``, in 1.0, without streaming."""
        url = self.remote.url.rstrip("/")
        card_url = url if url.endswith(".json") else url + "/.well-known/agent-card.json"
        try:
            answer = await http.get(card_url)
        except httpx.HTTPError as exc:
            raise A2aCallError(f"{self._who()}: its card at {card_url}: {exc}") from None
        if answer.status_code == 404 and not url.endswith(".json"):
            return Endpoint(url, wire.PROTOCOL_VERSION)
        card = _json(answer, f"{self._who()}: its card at {card_url}")
        offered = [
            # No version: the current one, as the SDK's client reads a card (1.0).
            (str(found.get("url")), str(found.get("protocolVersion") or wire.PROTOCOL_VERSION))
            for found in card.get("supportedInterfaces") or ()
            if isinstance(found, Mapping) and found.get("protocolBinding") == wire.BINDING
        ]
        if "url" in card and card.get("preferredTransport", wire.BINDING) == wire.BINDING:
            offered.append((str(card["url"]), str(card.get("protocolVersion") or "0.3")))
        capabilities = card.get("capabilities")
        streaming = isinstance(capabilities, Mapping) and capabilities.get("streaming") is True
        for wanted in (wire.PROTOCOL_VERSION, v03.VERSION):
            for found_url, version in offered:
                if _major_minor(version) == wanted:
                    return Endpoint(found_url, wanted, streaming)
        raise A2aCallError(
            f"{self._who()}: its card at {card_url} offers no A2A 1.0 or 0.3 JSON-RPC interface"
        )

    async def _rpc(
        self,
        http: httpx.AsyncClient,
        endpoint: Endpoint,
        method: str,
        params: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        headers = {wire.VERSION_HEADER: endpoint.version}
        try:
            answer = await http.post(endpoint.url, json=_request(method, params), headers=headers)
        except httpx.HTTPError as exc:
            raise A2aCallError(f"{self._who()}: {method}: {exc}") from None
        return self._result(answer, method)

    def _result(self, answer: httpx.Response, method: str) -> Mapping[str, Any]:
        return self._result_of(_json(answer, f"{self._who()}: {method}"), method)

    def _result_of(self, data: Mapping[str, Any], method: str) -> Mapping[str, Any]:
        error = data.get("error")
        if isinstance(error, Mapping):
            raise A2aCallError(
                f"{self._who()}: {method}: error {error.get('code')}: {error.get('message')}"
            )
        result = data.get("result")
        if not isinstance(result, Mapping):
            raise A2aCallError(f"{self._who()}: {method}: the answer has no result")
        return result

    async def _until_ended(
        self, http: httpx.AsyncClient, endpoint: Endpoint, task: Mapping[str, Any], sent: Sent
    ) -> Mapping[str, Any]:
        """Poll a task the agent answered before it ended."""
        waits = iter(POLL_EVERY)
        while _state(task) in (wire.SUBMITTED, wire.WORKING):
            await trio.sleep(next(waits, POLL_EVERY[-1]))
            if endpoint.version == v03.VERSION:
                task = v03.task_in(await self._rpc(http, endpoint, "tasks/get", {"id": task["id"]}))
            else:
                task = await self._rpc(http, endpoint, "GetTask", {"id": task.get("id")})
            sent.saw(task)
        return task

    def _answer(self, task: Mapping[str, Any]) -> str:
        state = _state(task)
        context = f"(task {task.get('id')}, context_id {task.get('contextId')})"
        if state != wire.COMPLETED:
            status = task.get("status") or {}
            why = _text(status["message"]) if isinstance(status.get("message"), Mapping) else ""
            raise A2aCallError(f"{self._who()} ended {state} {context}: {why or 'no reason given'}")
        texts = [_text(a, "") for a in task.get("artifacts") or () if isinstance(a, Mapping)]
        if not any(texts):
            agent = [m for m in task.get("history") or () if m.get("role") == "ROLE_AGENT"]
            texts = [_text(agent[-1])] if agent else []
        return "\n".join(t for t in texts if t) + f"\n\n{context}"


def _request(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}


async def _sse_data(answer: httpx.Response) -> AsyncIterator[str]:
    """The ``data`` of each event of an SSE answer (its lines joined, as SSE joins them)."""
    lines: list[str] = []
    async for line in answer.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
            lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    if lines:
        yield "\n".join(lines)


def _apply(task: dict[str, Any] | None, event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task as one more stream event leaves it (A2A's rules: a status replaces the status;
    an artifact chunk replaces its artifact, or with ``append`` adds its parts to it)."""
    if isinstance(event.get("task"), Mapping):
        return dict(event["task"])
    if task is None:
        return None
    update = event.get("statusUpdate")
    if isinstance(update, Mapping) and isinstance(update.get("status"), Mapping):
        return {**task, "status": dict(update["status"])}
    update = event.get("artifactUpdate")
    if isinstance(update, Mapping) and isinstance(update.get("artifact"), Mapping):
        artifact = dict(update["artifact"])
        artifacts = [dict(a) for a in task.get("artifacts") or () if isinstance(a, Mapping)]
        same = [
            i for i, a in enumerate(artifacts) if a.get("artifactId") == artifact.get("artifactId")
        ]
        if same and update.get("append"):
            kept = artifacts[same[0]]
            kept["parts"] = [*(kept.get("parts") or ()), *(artifact.get("parts") or ())]
        elif same:
            artifacts[same[0]] = artifact
        else:
            artifacts.append(artifact)
        return {**task, "artifacts": artifacts}
    return task


def _major_minor(version: str) -> str:
    """``1.0.0``, ``1.0`` and ``1`` are ``1.0``: a patch version does not change the wire."""
    parts = [*version.strip().split("."), "0"][:2]
    return ".".join(parts)


def _state(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state")) if isinstance(status, Mapping) else ""


def _text(holder: Mapping[str, Any], between: str = "\n") -> str:
    """The text of a message's or an artifact's parts (an artifact's chunks join as written)."""
    parts = holder.get("parts") or ()
    return between.join(str(p["text"]) for p in parts if isinstance(p, Mapping) and "text" in p)


def _json(answer: httpx.Response, what: str) -> Mapping[str, Any]:
    if answer.status_code >= 400:
        raise A2aCallError(f"{what}: HTTP {answer.status_code}: {answer.text[:200]}")
    return _json_text(answer.text, what)


def _json_text(text: str, what: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except ValueError:
        raise A2aCallError(f"{what}: the answer is not JSON") from None
    if not isinstance(data, Mapping):
        raise A2aCallError(f"{what}: expected a JSON object")
    return data
