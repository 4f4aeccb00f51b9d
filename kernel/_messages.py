"""The messages of a run and what a model call takes and gives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

Role = Literal["system", "user", "assistant", "tool"]


@attrs.frozen
class ToolCall:
    """A model's request to call tool ``name``; ``id`` identifies the call (replay uses it)."""

    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Message:
    """One message. Tool results carry ``tool_call_id``, the tool's ``name`` and ``is_error``.

    ``meta`` holds structured facts about the message that are not for the model (a compacted
    view marks a cut tool result with ``{"truncated": True, "original_chars": N}``).
    """

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    meta: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Usage:
    """Tokens a model call consumed, as the provider reported them (or estimated)."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@attrs.frozen
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen
class ModelRequest:
    """One model call. ``max_output_tokens`` None leaves the response length to the model."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    model: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    tool_choice: str | None = None
    stream: bool = False


@attrs.frozen
class ModelReply:
    """What a model call returned: an assistant message, its usage and why it stopped."""

    message: Message
    usage: Usage = Usage()
    finish_reason: str | None = None
    model: str | None = None  # the model that answered, as the provider says
    id: str | None = None  # the provider's id of the response (OpenAI's and Anthropic's "id")
