"""``check_provider``: one real call through a model provider, checking the reply's shape."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolSpec
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import Provider

from ._store import expect, expect_that

# -- providers ----------------------------------------------------------------------------------


async def check_provider(
    provider: Provider, *, tools: Sequence[ToolSpec] = (), stream: bool = True
) -> ModelReply:
    """One real call through ``provider`` (set up by you to answer), checking the reply's
    shape: an assistant message, usage in whole tokens, tool calls with ids and known names,
    and streamed text that adds up to the reply. Returns the reply. One call is one check:
    this kit has no ``only=``."""
    capacity = provider.capacity(None)
    expect_that(
        capacity is None or isinstance(capacity, ModelCapacity),
        "provider check capacity(None)",
        "None or a ModelCapacity",
        capacity,
    )
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    request = ModelRequest(
        [Message("system", "Be brief."), Message("user", "hi")],
        tools,
        max_output_tokens=64,
        stream=stream,
    )
    reply = await provider.complete(request, sink if stream else None)
    if not isinstance(reply, ModelReply):
        raise AssertionError(
            f"provider check complete(): expected a ModelReply, got {type(reply).__name__}"
        )
    expect(reply.message.role, "assistant", "provider check: the reply message's role")
    usage = (reply.usage.input_tokens, reply.usage.output_tokens)
    expect_that(
        all(isinstance(n, int) and n >= 0 for n in usage),
        "provider check: the reply's usage (input_tokens, output_tokens)",
        "whole numbers of tokens, 0 or more",
        usage,
    )
    names = {t.name for t in tools}
    for call in reply.message.tool_calls:
        expect_that(bool(call.id), "provider check: a tool call's id", "an id", call)
        expect_that(
            call.name in names,
            "provider check: a tool call's name",
            f"one of the offered tools {sorted(names)}",
            call.name,
        )
        expect_that(
            isinstance(call.arguments, Mapping),
            "provider check: a tool call's arguments",
            "a mapping",
            call.arguments,
        )
    if stream and deltas:
        expect(
            "".join(deltas),
            reply.message.content,
            "provider check: the streamed text (it adds up to the reply)",
        )
    close = provider.aclose()
    if inspect.isawaitable(close):
        await close
    return reply
