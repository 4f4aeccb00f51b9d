"""Chat Completions wire format: requests out, replies and stream chunks in."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.plugins.providerkit import tool_arguments

_LIMIT = re.compile(r"maximum context length is (\d+)")
_REQUESTED = re.compile(r"(?:resulted in|requested) (\d+) tokens")


def request_body(
    request: ModelRequest, model: str | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [message(m) for m in request.messages]}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = request.tool_choice
    if request.max_output_tokens is not None:
        body[str(options.get("max_tokens_field", "max_tokens"))] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:  # omitted: nucleus sampling is left to the provider
        body["top_p"] = request.top_p
    if request.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def message(m: Message) -> dict[str, Any]:
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["content"] = m.content or None
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))},
            }
            for c in m.tool_calls
        ]
    return out


def reply(body: Mapping[str, Any]) -> ModelReply:
    choice = (body.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            c.get("id") or f"call_{n}",
            c["function"]["name"],
            tool_arguments(c["function"].get("arguments")),
        )
        for n, c in enumerate(msg.get("tool_calls") or ())
    )
    return ModelReply(
        Message("assistant", msg.get("content") or "", tool_calls=calls),
        usage(body.get("usage")),
        choice.get("finish_reason"),
        body.get("model"),
    )


def usage(raw: Mapping[str, Any] | None) -> Usage:
    raw = raw or {}
    return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0))


class StreamAssembler:
    """Accumulates streamed chunks into one reply (a ``StreamReader`` of the toolkit)."""

    def __init__(self) -> None:
        self.done = False  # "data: [DONE]" seen: what follows is not read
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.model: str | None = None

    def feed(self, data: str) -> str:
        """Take one event's data, a JSON chunk or ``[DONE]``; return its text delta."""
        if self.done:
            return ""
        if data == "[DONE]":
            self.done = True
            return ""
        return self.feed_chunk(json.loads(data))

    def feed_chunk(self, chunk: Mapping[str, Any]) -> str:
        """Take one chunk; return its text delta (possibly empty)."""
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = usage(chunk["usage"])
        delta_text = ""
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                delta_text += delta["content"]
            for call in delta.get("tool_calls") or ():
                slot = self.calls.setdefault(
                    int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                function = call.get("function") or {}
                slot["id"] = call.get("id") or slot["id"]
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        self.text.append(delta_text)
        return delta_text

    def reply(self, shown: bool = False) -> ModelReply:
        calls = tuple(
            ToolCall(slot["id"] or f"call_{index}", slot["name"], tool_arguments(slot["arguments"]))
            for index, slot in sorted(self.calls.items())
        )
        message = Message("assistant", "".join(self.text), tool_calls=calls)
        return ModelReply(message, self.usage, self.finish_reason, self.model)


def context_limit(status: int, body: Mapping[str, Any]) -> tuple[bool, int | None, int | None]:
    """Is this a context-length error, and what limit and request size did the server state?"""
    error = body.get("error") if isinstance(body.get("error"), Mapping) else body
    error = error or {}
    text = str(error.get("message") or "")
    code = str(error.get("code") or error.get("type") or "")
    exceeded = status == 400 and (
        "context_length" in code
        or "exceed_context" in code
        or "maximum context length" in text
        or "context size" in text
    )
    if not exceeded:
        return False, None, None
    limit_match, requested_match = _LIMIT.search(text), _REQUESTED.search(text)
    limit = int(limit_match.group(1)) if limit_match else error.get("n_ctx")
    requested = int(requested_match.group(1)) if requested_match else error.get("n_prompt_tokens")
    return True, int(limit) if limit else None, int(requested) if requested else None
