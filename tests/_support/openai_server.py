"""A local HTTP server on 127.0.0.1 that speaks the Chat Completions wire protocol.

Like the real API, it refuses (400) a request whose tool calls and tool results do not pair:
every tool test that goes through it checks that the conversation sent is one the API takes.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import hypercorn.config
import hypercorn.trio
import trio


@attrs.define
class Answer:
    """One scripted answer: a JSON body, or a list of SSE chunks when ``chunks`` is set."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = attrs.Factory(dict)
    chunks: list[dict[str, Any]] | None = None


def text(content: str, prompt: int = 10, completion: int = 5) -> Answer:
    return Answer(
        {
            "id": "x",
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        }
    )


def tool_call(call_id: str, name: str, arguments: str) -> Answer:
    return tool_calls((call_id, name, arguments))


def tool_calls(*calls: tuple[str, str, str]) -> Answer:
    """A reply calling tools, each ``(id, name, arguments as JSON text)``."""
    return Answer(
        {
            "id": "x",
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                            for call_id, name, arguments in calls
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8},
        }
    )


def unpaired_tool_calls(messages: Any) -> str | None:
    """The API's refusal of ``messages`` whose tool calls and results do not pair, or None.

    An assistant message with ``tool_calls`` must be followed by one ``tool`` message per
    ``tool_call_id`` before any other message; a ``tool`` message must answer a call of the
    assistant message before it (the wording is the API's). Calls that end the conversation
    are let through."""
    waiting: list[str] = []  # the calls of the last assistant message not answered yet
    for index, message in enumerate(messages if isinstance(messages, list) else ()):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            if message.get("tool_call_id") not in waiting:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a"
                    f" preceeding message with 'tool_calls'. (messages.[{index}].role)"
                )
            waiting.remove(message["tool_call_id"])
            continue
        if waiting:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages"
                " responding to each 'tool_call_id'. The following tool_call_ids did not have"
                f" response messages: {', '.join(str(i) for i in waiting)}"
            )
        if role == "assistant":
            waiting = [call.get("id") for call in message.get("tool_calls") or ()]
    # Calls that end the conversation are let through (the API refuses them too, but no run
    # sends them, and a test of the wire format alone may).
    return None


@attrs.define
class FakeOpenAI:
    """Answers POST /v1/chat/completions from a queue and records every request body.

    A request whose tool calls and results do not pair is refused with the API's 400 (and
    kept in ``refused``), without using up an answer."""

    answers: list[Answer] = attrs.Factory(list)
    requests: list[dict[str, Any]] = attrs.Factory(list)
    refused: list[dict[str, Any]] = attrs.Factory(list)
    headers: list[dict[str, str]] = attrs.Factory(list)
    base_url: str = ""

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] != "/v1/chat/completions" or not self.answers:
            await self._send(send, 404, {"error": {"message": "nothing scripted"}}, {})
            return
        request = json.loads(body)
        problem = unpaired_tool_calls(request.get("messages"))
        if problem is not None:
            self.refused.append(request)
            error = {"message": problem, "type": "invalid_request_error", "param": "messages"}
            await self._send(send, 400, {"error": {**error, "code": None}}, {})
            return
        self.requests.append(request)
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        answer = self.answers.pop(0)
        if answer.chunks is None:
            await self._send(send, answer.status, answer.body, answer.headers)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for chunk in answer.chunks:
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})

    @staticmethod
    async def _send(send: Any, status: int, body: Any, headers: dict[str, str]) -> None:
        payload = json.dumps(body).encode()
        raw = [(b"content-type", b"application/json")]
        raw += [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})


async def serve_asgi(nursery: trio.Nursery, app: Any) -> tuple[str, trio.Event]:
    """Serve ``app`` with hypercorn on 127.0.0.1 (a free port); set the event to stop it."""
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.2
    shutdown = trio.Event()
    binds = await nursery.start(
        lambda task_status: hypercorn.trio.serve(
            app, config, shutdown_trigger=shutdown.wait, task_status=task_status
        )
    )
    return binds[0], shutdown
