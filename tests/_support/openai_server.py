"""A local HTTP server on 127.0.0.1 that speaks the Chat Completions wire protocol."""

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
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8},
        }
    )


@attrs.define
class FakeOpenAI:
    """Answers POST /v1/chat/completions from a queue and records every request body."""

    answers: list[Answer] = attrs.Factory(list)
    requests: list[dict[str, Any]] = attrs.Factory(list)
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
        self.requests.append(json.loads(body))
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
