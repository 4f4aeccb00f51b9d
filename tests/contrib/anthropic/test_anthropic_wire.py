"""Request bodies and reply parsing of the anthropic provider, called directly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _support.anthropic_server import Answer, FakeAnthropic, text

from soulacy.contrib.anthropic import AnthropicProvider
from soulacy.kernel.messages import Message, ModelRequest, ToolCall, ToolSpec
from soulacy.kernel.providers import ProviderConfig

MakeProvider = Callable[..., AnthropicProvider]
SPEC = ToolSpec("weather", "The weather.", {"type": "object", "properties": {}})


@pytest.fixture
async def make_provider(anthropic_server: FakeAnthropic) -> AsyncIterator[MakeProvider]:
    made: list[AnthropicProvider] = []

    def make(**config: Any) -> AnthropicProvider:
        config.setdefault("model", "claude-fake")
        entry = ProviderConfig(type="anthropic", base_url=anthropic_server.base_url, **config)
        made.append(AnthropicProvider("p", entry, environ={}))
        return made[-1]

    yield make
    for provider in made:
        await provider.aclose()


def block(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


async def test_system_is_apart_and_turns_alternate(
    make_provider: MakeProvider, anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(text("ok"))
    calls = (ToolCall("t1", "weather", {"city": "Oslo"}), ToolCall("t2", "weather", {}))
    messages = [
        Message("system", "Rule one."),
        Message("user", "u1"),
        Message("system", "Rule two."),  # the API has one system prompt: it joins the first
        Message("user", "u2"),
        Message("assistant", "", tool_calls=calls),
        Message("tool", "sunny in Oslo", tool_call_id="t1", name="weather"),
        Message("tool", "boom", tool_call_id="t2", name="weather", is_error=True),
        Message("user", "Anything else?"),
        Message("assistant", ""),  # an empty turn is refused by the API: left out
        Message("user", "Hello?"),
    ]
    await make_provider().complete(ModelRequest(messages, tools=[SPEC]))
    (body,) = anthropic_server.requests
    assert body["system"] == "Rule one.\n\nRule two."
    assert body["messages"] == [
        {"role": "user", "content": [block("text", text="u1"), block("text", text="u2")]},
        {
            "role": "assistant",
            "content": [
                block("tool_use", id="t1", name="weather", input={"city": "Oslo"}),
                block("tool_use", id="t2", name="weather", input={}),
            ],
        },
        {
            "role": "user",
            "content": [
                block("tool_result", tool_use_id="t1", content="sunny in Oslo"),
                block("tool_result", tool_use_id="t2", content="boom", is_error=True),
                block("text", text="Anything else?"),
                block("text", text="Hello?"),
            ],
        },
    ]


async def test_tool_results_open_their_user_turn(
    make_provider: MakeProvider, anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(text("ok"))
    messages = [
        Message("user", "go"),
        Message("assistant", "", tool_calls=(ToolCall("t1", "weather"),)),
        Message("user", "(a note that arrived first)"),
        Message("tool", "done", tool_call_id="t1"),
    ]
    await make_provider().complete(ModelRequest(messages, tools=[SPEC]))
    kinds = [b["type"] for b in anthropic_server.requests[0]["messages"][-1]["content"]]
    assert kinds == ["tool_result", "text"]


@pytest.mark.parametrize(
    ("configured", "requested", "sent"), [(None, None, 4096), (1000, None, 1000), (1000, 777, 777)]
)
async def test_max_tokens_is_always_sent(
    make_provider: MakeProvider,
    anthropic_server: FakeAnthropic,
    configured: int | None,
    requested: int | None,
    sent: int,
) -> None:
    anthropic_server.answers.append(text("ok"))
    provider = make_provider(max_output_tokens=configured)
    await provider.complete(ModelRequest([Message("user", "x")], max_output_tokens=requested))
    assert anthropic_server.requests[0]["max_tokens"] == sent


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("any", {"type": "any"}),
        ("required", {"type": "any"}),
        ("weather", {"type": "tool", "name": "weather"}),
    ],
)
async def test_tool_choice(
    make_provider: MakeProvider, anthropic_server: FakeAnthropic, choice: str, sent: dict[str, str]
) -> None:
    anthropic_server.answers.append(text("ok"))
    request = ModelRequest([Message("user", "x")], tools=[SPEC], tool_choice=choice)
    await make_provider().complete(request)
    assert anthropic_server.requests[0]["tool_choice"] == sent


async def test_the_reply_skips_other_blocks_and_counts_cached_input(
    make_provider: MakeProvider, anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(
        Answer(
            {
                "type": "message",
                "id": "msg_abc",
                "role": "assistant",
                "model": "claude-fake",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Hello "},
                    {"type": "text", "text": "there."},
                ],
                "stop_reason": "max_tokens",
                "usage": {
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 5,
                    "cache_read_input_tokens": 100,
                    "output_tokens": 3,
                },
            }
        )
    )
    reply = await make_provider().complete(ModelRequest([Message("user", "x")]))
    assert (reply.message.content, reply.message.tool_calls) == ("Hello there.", ())
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (115, 3)
    assert (reply.finish_reason, reply.model, reply.id) == ("max_tokens", "claude-fake", "msg_abc")


async def test_options_set_the_api_version(
    make_provider: MakeProvider, anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(text("ok"))
    await make_provider(options={"anthropic_version": "2099-01-01"}).complete(
        ModelRequest([Message("user", "x")])
    )
    assert anthropic_server.headers[0]["anthropic-version"] == "2099-01-01"
    assert "x-api-key" not in anthropic_server.headers[0]  # no key configured: none sent
