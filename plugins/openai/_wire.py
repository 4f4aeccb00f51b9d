"""Chat Completions wire format: requests out, replies and stream chunks in."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.plugins.providerkit import json_text, tool_arguments

# Context-length refusals of the servers that speak Chat Completions (see ``context_limit``).
_CODES = re.compile(r"context_length_exceeded|exceed_context_size|ContextWindowExceeded", re.I)
_WORDINGS = re.compile(
    r"maximum context length"  # OpenAI, vLLM, LiteLLM passing either on
    r"|context window (?:exceeded|of this model)"  # LiteLLM, OpenAI
    r"|exceeds? the (?:available )?context (?:size|length|window)"  # llama.cpp, Ollama
    r"|input length exceeds the context length"  # Ollama
    r"|exceeded max context length"  # Ollama's runner
    r"|truncating input prompt",  # Ollama, when it says it cut the prompt
    re.I,
)
_LIMIT = (
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"available context size \((\d+) tokens\)"),  # llama.cpp
    re.compile(r"\blimit=(\d+)"),  # Ollama's truncation
    re.compile(r"Max Input Tokens=(\d+)"),  # LiteLLM's pre-call check
)
_PROMPT = (  # the prompt's tokens: a total that includes the completion is not it
    re.compile(r"\((\d+) in the messages"),  # OpenAI, vLLM: "requested N tokens (M in the ..."
    re.compile(r"messages resulted in (\d+) tokens"),  # OpenAI
    re.compile(r"request has (\d+) input tokens"),  # vLLM
    re.compile(r"prompt contains at least (\d+) input tokens"),  # vLLM
    re.compile(r"request \((\d+) tokens\) exceeds"),  # llama.cpp
    re.compile(r"\bprompt=(\d+)"),  # Ollama's truncation
    re.compile(r"Max Input Tokens=\d+, Got=(\d+)"),  # LiteLLM's pre-call check
)


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
                # Arguments that are not finite numbers are sent as the parser marks them.
                "function": {
                    "name": c.name,
                    "arguments": json_text(tool_arguments(dict(c.arguments))),
                },
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
        body.get("id") if isinstance(body.get("id"), str) else None,
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
        self.id: str | None = None

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
        found = chunk.get("id")
        self.id = found if isinstance(found, str) else self.id
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
        return ModelReply(message, self.usage, self.finish_reason, self.model, self.id)


def context_limit(status: int, body: Mapping[str, Any]) -> tuple[bool, int | None, int | None]:
    """Is this a context-length refusal, and what limit and prompt size (tokens) did it state?

    Recognised from a structured code (OpenAI's ``context_length_exceeded``, llama.cpp's
    ``exceed_context_size_error``, LiteLLM's ``ContextWindowExceededError``) or from the
    wording of OpenAI, vLLM, LiteLLM, llama.cpp and Ollama; any error status but 429, since
    a rate limit may also speak of tokens requested. The size is the prompt's, not the total.
    """
    if status < 400 or status == 429:
        return False, None, None
    raw = body.get("error", body)
    error: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {"message": raw}
    text = str(error.get("message") or "")
    code = f"{error.get('code') or ''} {error.get('type') or ''}"
    if not (_CODES.search(code) or _CODES.search(text) or _WORDINGS.search(text)):
        return False, None, None
    limit = _number(error.get("n_ctx")) or _first(_LIMIT, text)
    requested = _number(error.get("n_prompt_tokens")) or _first(_PROMPT, text)
    return True, limit, requested


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None
