"""Anthropic Messages wire format: requests out, replies and stream events in."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderError
from soulacy.plugins.providerkit import tool_arguments

# "prompt is too long: 210000 tokens > 200000 maximum"
_PROMPT_TOO_LONG = re.compile(r"prompt is too long:\s*(\d+) tokens? > (\d+)")
# "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, ..."
_EXCEEDS_LIMIT = re.compile(r"exceed context limit:\s*(\d+) \+ (\d+) > (\d+)")

# Mid-stream error events carry no HTTP status; these are the statuses their types go with.
STREAM_ERROR_STATUS = {"rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}


def request_body(
    request: ModelRequest, model: str, max_tokens: int, stream: bool
) -> dict[str, Any]:
    system, messages = conversation(request.messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
            for t in request.tools
        ]
        if request.tool_choice:
            body["tool_choice"] = tool_choice(request.tool_choice)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:  # omitted: nucleus sampling is left to the provider
        body["top_p"] = request.top_p
    if stream:
        body["stream"] = True
    return body


def tool_choice(choice: str) -> dict[str, Any]:
    """An agent's ``tool_choice`` string in Anthropic's form; any other string names a tool."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice in ("any", "required"):  # "required" is the Chat Completions spelling
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def conversation(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The system text, and the other messages as alternating user/assistant turns.

    The API takes the system prompt apart from ``messages``, tool results as blocks of a user
    turn, and no two turns of one role in a row, so consecutive same-role messages are merged.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = content_blocks(m)
        if not blocks:  # the API refuses empty turns (an empty reply the engine nudged)
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        # Tool results must open their user turn, ahead of any text merged into it.
        turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return "\n\n".join(system), turns


def content_blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id,
            "content": m.content,
        }
        if m.is_error:
            result["is_error"] = True
        return [result]
    blocks: list[dict[str, Any]] = []
    if m.content:  # empty text blocks are refused
        blocks.append({"type": "text", "text": m.content})
    for call in m.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        )
    return blocks


def reply(body: Mapping[str, Any]) -> ModelReply:
    text: list[str] = []
    calls: list[ToolCall] = []
    for n, block in enumerate(body.get("content") or ()):
        if block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(
                ToolCall(
                    block.get("id") or f"call_{n}",
                    block["name"],
                    tool_arguments(block.get("input")),
                )
            )
        # Other blocks (thinking, …) are not part of the reply's text.
    return ModelReply(
        Message("assistant", "".join(text), tool_calls=tuple(calls)),
        usage(body.get("usage")),
        body.get("stop_reason"),
        body.get("model"),
        body.get("id") if isinstance(body.get("id"), str) else None,
    )


def input_tokens(raw: Mapping[str, Any]) -> int:
    # Cached prompt tokens are reported apart from input_tokens; the prompt's size is the sum.
    return sum(
        int(raw.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def usage(raw: Mapping[str, Any] | None) -> Usage:
    raw = raw or {}
    return Usage(input_tokens(raw), int(raw.get("output_tokens") or 0))


class StreamAssembler:
    """Accumulates the events of one streamed message into a reply (a ``StreamReader`` of the
    toolkit); ``name`` is the provider's, for the errors of a stream that ends badly."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.text: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.model: str | None = None
        self.id: str | None = None
        self.stopped = False  # message_stop seen
        self.error: Mapping[str, Any] | None = None  # the body of an ``error`` event

    def feed(self, data: str) -> str:
        """Take one event's data (JSON); return its text delta. After an ``error`` event the
        rest of the stream is not read."""
        if self.error is not None:
            return ""
        try:
            event = json.loads(data)
        except ValueError:
            event = {"type": "error", "error": {"message": f"bad event: {data!r}"}}
        return self.feed_event(event)

    def feed_event(self, event: Mapping[str, Any]) -> str:
        """Take one event; return its text delta (possibly empty)."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            found = message.get("id")
            self.id = found if isinstance(found, str) else self.id
            self.input_tokens = input_tokens(message.get("usage") or {})
            self.output_tokens = int((message.get("usage") or {}).get("output_tokens") or 0)
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            block["partial_json"] = ""
            self.blocks[int(event.get("index", 0))] = block
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            block = self.blocks.setdefault(int(event.get("index", 0)), {"partial_json": ""})
            if delta.get("type") == "text_delta":
                text = str(delta.get("text") or "")
                self.text.append(text)
                return text
            if delta.get("type") == "input_json_delta":
                block["partial_json"] += delta.get("partial_json") or ""
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            raw = event.get("usage") or {}
            if raw.get("output_tokens") is not None:  # cumulative, not an increment
                self.output_tokens = int(raw["output_tokens"])
            if raw.get("input_tokens") is not None:
                self.input_tokens = input_tokens(raw)
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = event.get("error") or {}
        return ""

    def reply(self, shown: bool) -> ModelReply:
        """The reply; an error event or a stream cut before ``message_stop`` is a
        ``ProviderError``, retryable only while no text was ``shown``."""
        if self.error is not None:
            kind, detail = error_of({"error": self.error}, "")
            status = STREAM_ERROR_STATUS.get(kind)
            raise ProviderError(
                f"provider {self.name!r} failed mid-stream: {kind or 'error'}: {detail}",
                status=status,
                retryable=status is not None and not shown,
            )
        if not self.stopped:
            raise ProviderError(
                f"provider {self.name!r}: the stream ended before message_stop",
                retryable=not shown,
            )
        calls = tuple(
            ToolCall(
                block.get("id") or f"call_{index}",
                block.get("name") or "",
                # The start event's input is {} and the deltas carry it all, as JSON text.
                tool_arguments(block["partial_json"] or block.get("input")),
            )
            for index, block in sorted(self.blocks.items())
            if block.get("type") == "tool_use"
        )
        message = Message("assistant", "".join(self.text), tool_calls=calls)
        usage = Usage(self.input_tokens, self.output_tokens)
        return ModelReply(message, usage, self.stop_reason, self.model, self.id)


def error_of(body: object, text: str) -> tuple[str, str]:
    """The ``(type, message)`` of an error answer, whatever shape it came in."""
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        return str(error.get("type") or ""), str(error.get("message") or "")
    return "", text[:500]


def context_limit(status: int, message: str) -> tuple[bool, int | None, int | None]:
    """Is this a context-length refusal, and what limit and request size did it state?"""
    if status != 400:
        return False, None, None
    match = _PROMPT_TOO_LONG.search(message)
    if match:
        return True, int(match.group(2)), int(match.group(1))
    match = _EXCEEDS_LIMIT.search(message)
    if match:  # the prompt fits but not with the output allowance on top
        return True, int(match.group(3)), int(match.group(1)) + int(match.group(2))
    if "prompt is too long" in message:
        return True, None, None
    return False, None, None
