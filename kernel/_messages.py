"""The messages of a run and what a model call takes and gives."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    model: str | None = None


def answers_to_unanswered_calls(
    messages: Sequence[Message], say: Callable[[ToolCall], str], start: int = 0
) -> list[tuple[int, Message]]:
    """Tool results for the tool calls in ``messages[start:]`` that have none, as ``(index,
    message)`` pairs: each goes before ``messages[index]`` (``len(messages)``: at the end),
    after the other results of its call's reply, in call order. Each is an error whose content
    ``say(call)`` gives.

    Model APIs refuse a conversation in which an assistant's tool call is not answered by a
    tool result before the next other message (a run that ended while a tool ran left one).
    """
    answers: list[tuple[int, Message]] = []
    waiting: list[ToolCall] = []  # the calls of the last reply not answered yet
    for index in range(start, len(messages)):
        message = messages[index]
        if message.role == "tool":
            for n, call in enumerate(waiting):
                if call.id == message.tool_call_id:
                    del waiting[n]
                    break
            continue
        if waiting:
            answers += [(index, _answer(call, say)) for call in waiting]
            waiting = []
        if message.tool_calls:
            waiting = list(message.tool_calls)
    answers += [(len(messages), _answer(call, say)) for call in waiting]
    return answers


def _answer(call: ToolCall, say: Callable[[ToolCall], str]) -> Message:
    return Message("tool", say(call), tool_call_id=call.id, name=call.name, is_error=True)
