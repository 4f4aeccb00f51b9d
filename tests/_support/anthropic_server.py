"""A local HTTP server on 127.0.0.1 that speaks the Anthropic Messages wire protocol.

Like the real API, it refuses (400) a request whose ``tool_use`` and ``tool_result`` blocks do
not pair: every tool test that goes through it checks that the conversation sent is one the API
takes.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio

from _support.openai_server import serve_asgi

__all__ = [
    "Answer",
    "FakeAnthropic",
    "error",
    "serve_asgi",
    "stream_dropped",
    "stream_error",
    "stream_text",
    "stream_tool_use",
    "text",
    "tool_use",
    "unpaired_tool_uses",
]


@attrs.define
class Answer:
    """One scripted answer: a JSON body, or a list of SSE events when ``events`` is set."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = attrs.Factory(dict)
    events: list[dict[str, Any]] | None = None
    drop: bool = False  # end the connection after the events, mid-body


class Dropped(Exception):
    """Raised by the app to make the server cut a streamed answer short."""


def message(content: list[dict[str, Any]], stop: str, input_tokens: int, output: int) -> Answer:
    return Answer(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output},
        }
    )


def text(content: str, input_tokens: int = 10, output: int = 5) -> Answer:
    return message([{"type": "text", "text": content}], "end_turn", input_tokens, output)


def tool_use(*calls: tuple[str, str, dict[str, Any]], preface: str = "") -> Answer:
    """A reply calling tools, each ``(id, name, input)``, optionally after some text."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": preface}] if preface else []
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return message(blocks, "tool_use", 20, 8)


def error(status: int, kind: str, text: str, headers: dict[str, str] | None = None) -> Answer:
    body = {"type": "error", "error": {"type": kind, "message": text}}
    return Answer(body, status, headers or {})


def _start(input_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_s",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1},
        },
    }


def _end(stop: str, output: int) -> list[dict[str, Any]]:
    delta = {"type": "message_delta", "delta": {"stop_reason": stop}}
    return [{**delta, "usage": {"output_tokens": output}}, {"type": "message_stop"}]


def _text_block(index: int, pieces: tuple[str, ...]) -> list[dict[str, Any]]:
    start = {"type": "content_block_start", "index": index}
    events = [{**start, "content_block": {"type": "text", "text": ""}}]
    events += [
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
        for p in pieces
    ]
    return events


def stream_text(*pieces: str, input_tokens: int = 9, output: int = 4) -> Answer:
    events = [_start(input_tokens), {"type": "ping"}, *_text_block(0, pieces)]
    events += [{"type": "content_block_stop", "index": 0}, *_end("end_turn", output)]
    return Answer(events=events)


def stream_tool_use(call_id: str, name: str, *parts: str, preface: str = "") -> Answer:
    """A streamed tool call whose input arrives as ``input_json_delta`` parts."""
    events = [_start(30)]
    index = 0
    if preface:
        events += [*_text_block(0, (preface,)), {"type": "content_block_stop", "index": 0}]
        index = 1
    events.append(
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        }
    )
    events += [
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": part},
        }
        for part in parts
    ]
    events += [{"type": "content_block_stop", "index": index}, *_end("tool_use", 12)]
    return Answer(events=events)


def stream_dropped(*pieces: str) -> Answer:
    """A stream whose connection is cut after the given text pieces, if any."""
    events = [_start(5), *(_text_block(0, pieces) if pieces else [])]
    return Answer(events=events, drop=True)


def stream_error(kind: str, *pieces: str) -> Answer:
    """A stream that fails with an ``error`` event, after the given text pieces if any."""
    events = [_start(5), *(_text_block(0, pieces) if pieces else [])]
    events.append({"type": "error", "error": {"type": kind, "message": "Overloaded"}})
    return Answer(events=events)


def unpaired_tool_uses(messages: Any) -> str | None:
    """The API's refusal of ``messages`` whose tool uses and results do not pair, or None.

    Each ``tool_use`` block of an assistant turn must have a ``tool_result`` block in the next
    (user) turn, and each ``tool_result`` block a ``tool_use`` block in the turn before it (the
    wording is the API's). Tool uses that end the conversation are let through."""
    waiting: list[Any] = []  # the ids of the tool uses of the last assistant turn
    turns = messages if isinstance(messages, list) else []
    for index, turn in enumerate(turns):
        content = turn.get("content") if isinstance(turn, dict) else None
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        missing = [i for i in waiting if i not in results]
        if missing:
            return (
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks"
                f" immediately after: {', '.join(str(i) for i in missing)}. Each `tool_use`"
                " block must have a corresponding `tool_result` block in the next message."
            )
        for number, block in enumerate(blocks):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in waiting:
                return (
                    f"messages.{index}.content.{number}: unexpected `tool_use_id` found in"
                    f" `tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result`"
                    " block must have a corresponding `tool_use` block in the previous message."
                )
        waiting = []
        if turn.get("role") == "assistant":
            waiting = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
    # Tool uses that end the conversation are let through (the API refuses them too, but no
    # run sends them, and a test of the wire format alone may).
    return None


@attrs.define
class FakeAnthropic:
    """Answers POST /v1/messages from a queue and records every request body and its headers.

    A request whose tool uses and results do not pair is refused with the API's 400 (and kept
    in ``refused``), without using up an answer."""

    answers: list[Answer] = attrs.Factory(list)
    requests: list[dict[str, Any]] = attrs.Factory(list)
    refused: list[dict[str, Any]] = attrs.Factory(list)
    headers: list[dict[str, str]] = attrs.Factory(list)
    arrived: list[float] = attrs.Factory(list)  # trio.current_time() of each recorded request
    base_url: str = ""

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        if scope["method"] != "POST" or scope["path"] != "/v1/messages" or not self.answers:
            answer = error(404, "not_found_error", "nothing scripted")
            await self._send(send, answer.status, answer.body, {})
            return
        request = json.loads(body)
        problem = unpaired_tool_uses(request.get("messages"))
        if problem is not None:
            self.refused.append(request)
            answer = error(400, "invalid_request_error", problem)
            await self._send(send, answer.status, answer.body, {})
            return
        self.requests.append(request)
        self.arrived.append(trio.current_time())
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        answer = self.answers.pop(0)
        if answer.events is None:
            await self._send(send, answer.status, answer.body, answer.headers)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for item in answer.events:
            data = f"event: {item['type']}\ndata: {json.dumps(item)}\n\n".encode()
            await send({"type": "http.response.body", "body": data, "more_body": True})
        if answer.drop:
            raise Dropped  # hypercorn closes the connection without finishing the body
        await send({"type": "http.response.body", "body": b""})

    @staticmethod
    async def _send(send: Any, status: int, body: Any, headers: dict[str, str]) -> None:
        payload = json.dumps(body).encode()
        raw = [(b"content-type", b"application/json")]
        raw += [(k.encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})
