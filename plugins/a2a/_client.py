"""Remote A2A agents as tools: SOUL.yaml ``a2a_agents.<name>`` is the tool ``a2a__<name>``.

A call sends the tool's ``text`` to the remote agent as one A2A 1.0 ``SendMessage``, or 0.3's
``message/send`` to an agent whose card offers only 0.3 (JSON-RPC over httpx: no SDK at run
time), and answers the reply of the task it makes; a task that does not complete is a tool error
saying its state. The engine gives these tools what it gives every
tool: call ids, replay of a recorded result instead of a second call, and proof receipts.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
import trio

from soulacy.kernel import Tool, current_tool_call

from . import _v03 as v03
from . import _wire as wire

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec

    from ._skills import RemoteAgent

PREFIX = "a2a__"
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


class RemoteCall:
    """The function of one remote agent's tool; its card is read once."""

    def __init__(self, name: str, remote: RemoteAgent) -> None:
        self.name, self.remote = name, remote
        self.endpoint: tuple[str, str] | None = None  # (its JSON-RPC URL, its A2A version)
        self.__name__ = f"a2a_{name}"

    async def __call__(self, text: str, context_id: str | None = None) -> str:
        with trio.fail_after(self.remote.timeout):
            async with httpx.AsyncClient(headers=self._headers(), timeout=60) as http:
                endpoint = self.endpoint or await self._endpoint(http)
                self.endpoint = endpoint
                result = await self._send(http, endpoint, text, context_id)
                if "message" in result:  # the agent answered without a task
                    return _text(result["message"])
                task = result.get("task")
                if not isinstance(task, Mapping):
                    raise A2aCallError(f"{self._who()} answered neither a task nor a message")
                task = await self._until_ended(http, endpoint, task)
                return self._answer(task)

    async def _send(
        self, http: httpx.AsyncClient, endpoint: tuple[str, str], text: str, context_id: str | None
    ) -> Mapping[str, Any]:
        """``SendMessage``'s result (a task or a message) in 1.0's shapes, whatever was spoken."""
        # The call's idempotency key names the message: sent again for the same call (a run's
        # retry after a crash), it is the same message, which a server may take once.
        call = current_tool_call()
        message_id = call.idempotency_key if call is not None else uuid.uuid4().hex
        if endpoint[1] == v03.VERSION:
            message = v03.message_out(text, message_id, context_id)
            found = await self._rpc(http, endpoint, "message/send", {"message": message})
            return v03.answer_in(found)
        message = wire.text_message("ROLE_USER", text, message_id, context_id or "")
        if not context_id:
            del message["contextId"]
        return await self._rpc(http, endpoint, "SendMessage", {"message": message})

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

    async def _endpoint(self, http: httpx.AsyncClient) -> tuple[str, str]:
        """The JSON-RPC URL and A2A version of the agent's card (1.0 rather than 0.3): the card
        at ``url`` when it names a card, else at ``url``'s well-known path; an agent without a
        card is served at ``url``, in 1.0."""
        url = self.remote.url.rstrip("/")
        card_url = url if url.endswith(".json") else url + "/.well-known/agent-card.json"
        try:
            answer = await http.get(card_url)
        except httpx.HTTPError as exc:
            raise A2aCallError(f"{self._who()}: its card at {card_url}: {exc}") from None
        if answer.status_code == 404 and not url.endswith(".json"):
            return url, wire.PROTOCOL_VERSION
        card = _json(answer, f"{self._who()}: its card at {card_url}")
        offered = [
            # No version: the current one, as the SDK's client reads a card (1.0).
            (str(found.get("url")), str(found.get("protocolVersion") or wire.PROTOCOL_VERSION))
            for found in card.get("supportedInterfaces") or ()
            if isinstance(found, Mapping) and found.get("protocolBinding") == wire.BINDING
        ]
        if "url" in card and card.get("preferredTransport", wire.BINDING) == wire.BINDING:
            offered.append((str(card["url"]), str(card.get("protocolVersion") or "0.3")))
        for wanted in (wire.PROTOCOL_VERSION, v03.VERSION):
            for found_url, version in offered:
                if _major_minor(version) == wanted:
                    return found_url, wanted
        raise A2aCallError(
            f"{self._who()}: its card at {card_url} offers no A2A 1.0 or 0.3 JSON-RPC interface"
        )

    async def _rpc(
        self,
        http: httpx.AsyncClient,
        endpoint: tuple[str, str],
        method: str,
        params: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
        url, version = endpoint
        try:
            answer = await http.post(url, json=body, headers={wire.VERSION_HEADER: version})
        except httpx.HTTPError as exc:
            raise A2aCallError(f"{self._who()}: {method}: {exc}") from None
        data = _json(answer, f"{self._who()}: {method}")
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
        self, http: httpx.AsyncClient, endpoint: tuple[str, str], task: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """Poll a task the agent answered before it ended (an agent may answer at once)."""
        waits = iter(POLL_EVERY)
        while _state(task) in (wire.SUBMITTED, wire.WORKING):
            await trio.sleep(next(waits, POLL_EVERY[-1]))
            if endpoint[1] == v03.VERSION:
                task = v03.task_in(await self._rpc(http, endpoint, "tasks/get", {"id": task["id"]}))
            else:
                task = await self._rpc(http, endpoint, "GetTask", {"id": task.get("id")})
        return task

    def _answer(self, task: Mapping[str, Any]) -> str:
        state = _state(task)
        context = f"(task {task.get('id')}, context_id {task.get('contextId')})"
        if state != wire.COMPLETED:
            status = task.get("status") or {}
            why = _text(status["message"]) if isinstance(status.get("message"), Mapping) else ""
            raise A2aCallError(f"{self._who()} ended {state} {context}: {why or 'no reason given'}")
        texts = [_text(a) for a in task.get("artifacts") or () if isinstance(a, Mapping)]
        if not any(texts):
            agent = [m for m in task.get("history") or () if m.get("role") == "ROLE_AGENT"]
            texts = [_text(agent[-1])] if agent else []
        return "\n".join(t for t in texts if t) + f"\n\n{context}"


def _major_minor(version: str) -> str:
    """``1.0.0``, ``1.0`` and ``1`` are ``1.0``: a patch version does not change the wire."""
    parts = [*version.strip().split("."), "0"][:2]
    return ".".join(parts)


def _state(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    return str(status.get("state")) if isinstance(status, Mapping) else ""


def _text(holder: Mapping[str, Any]) -> str:
    parts = holder.get("parts") or ()
    return "\n".join(str(p["text"]) for p in parts if isinstance(p, Mapping) and "text" in p)


def _json(answer: httpx.Response, what: str) -> Mapping[str, Any]:
    if answer.status_code >= 400:
        raise A2aCallError(f"{what}: HTTP {answer.status_code}: {answer.text[:200]}")
    try:
        data = answer.json()
    except ValueError:
        raise A2aCallError(f"{what}: the answer is not JSON") from None
    if not isinstance(data, Mapping):
        raise A2aCallError(f"{what}: expected a JSON object")
    return data
