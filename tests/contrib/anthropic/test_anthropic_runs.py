"""Runs through ``kernel.run`` on the anthropic provider against a local Messages API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from _support.anthropic_server import (
    FakeAnthropic,
    stream_text,
    stream_tool_use,
    text,
    tool_use,
)

from soulacy.kernel import Event, Kernel, Tool, UsageError


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def flaky(city: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no data for {city}")


def tool_json(function: Callable[..., Any]) -> dict[str, Any]:
    spec = Tool.from_function(function).spec
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def drain(events: Any) -> list[Event]:
    seen: list[Event] = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            return seen


async def test_a_tool_call_round_trip_over_the_wire(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        tool_use(("toolu_1", "weather", {"city": "Oslo"}), preface="Let me check."),
        text("It is sunny in Oslo.", input_tokens=40, output=6),
    ]
    result = await make().run("a", "Weather in Oslo?")
    assert (result.status, result.reply) == ("completed", "It is sunny in Oslo.")
    assert (result.input_tokens, result.output_tokens) == (60, 14)
    first, second = anthropic_server.requests
    assert first == {
        "model": "claude-fake",
        "max_tokens": 16384,  # the resolved per-response allowance
        "system": "Be brief.",  # apart from the messages
        "messages": [user("Weather in Oslo?")],
        "tools": [tool_json(weather), tool_json(flaky)],
    }
    assert second["messages"] == [
        user("Weather in Oslo?"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny in Oslo"}
            ],
        },
    ]
    headers = anthropic_server.headers[0]
    assert headers["x-api-key"] == "sk-ant-test"
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["content-type"] == "application/json"


async def test_the_tool_results_of_one_turn_share_one_user_message(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        tool_use(("t1", "weather", {"city": "Oslo"}), ("t2", "flaky", {"city": "Rome"})),
        text("Oslo is sunny; Rome is unknown."),
    ]
    soul = {"provider": "claude", "temperature": 0.2, "top_p": 0.9, "tool_choice": "any"}
    result = await make(llm={**soul, "max_tokens": 2000}).run("a", "Oslo and Rome?")
    assert result.status == "completed"
    first, second = anthropic_server.requests
    assert first["tool_choice"] == {"type": "any"}
    assert (first["temperature"], first["top_p"], first["max_tokens"]) == (0.2, 0.9, 2000)
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    ok, failed = second["messages"][-1]["content"]
    assert ok == {"type": "tool_result", "tool_use_id": "t1", "content": "sunny in Oslo"}
    assert (failed["tool_use_id"], failed["is_error"]) == ("t2", True)
    assert "no data for Rome" in failed["content"]


async def test_turns_alternate_when_the_engine_nudges_after_an_empty_reply(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [text(""), text("Here it is.")]
    result = await make().run("a", "hi")
    assert (result.status, result.reply) == ("completed", "Here it is.")
    # The empty assistant turn is refused by the API: it is left out, and the two user
    # messages on either side of it become one user turn.
    (merged,) = anthropic_server.requests[1]["messages"]
    assert merged["role"] == "user"
    asked, nudge = merged["content"]
    assert asked == {"type": "text", "text": "hi"}
    assert nudge["text"].startswith("[soulacy] Your last reply was empty.")


async def test_a_second_run_of_a_session_continues_the_alternation(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [text("One."), text("Two.")]
    kernel = make()
    first = await kernel.run("a", "first")
    await kernel.run("a", "second", session_id=first.session_id)
    assert anthropic_server.requests[1]["messages"] == [
        user("first"),
        {"role": "assistant", "content": [{"type": "text", "text": "One."}]},
        user("second"),
    ]


async def test_streamed_text_and_streamed_tool_use(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        stream_tool_use("toolu_9", "weather", '{"ci', 'ty": "Ro', 'me"}', preface="Checking. "),
        stream_text("Sunny ", "in Rome."),
    ]
    kernel = make(stream=True)
    events = kernel.events.subscribe(buffer=float("inf"))
    result = await kernel.run("a", "Rome?", stream=True)
    assert (result.status, result.reply) == ("completed", "Sunny in Rome.")
    first, second = anthropic_server.requests
    assert first["stream"] is True
    assert second["messages"][1]["content"] == [
        {"type": "text", "text": "Checking. "},
        {"type": "tool_use", "id": "toolu_9", "name": "weather", "input": {"city": "Rome"}},
    ]
    seen = drain(events)
    deltas = [e.data["text"] for e in seen if e.type == "text.delta"]
    assert deltas == ["Checking. ", "Sunny ", "in Rome."]
    (tool_result,) = [e.data for e in seen if e.type == "tool.result"]
    assert tool_result["preview"] == "sunny in Rome"
    # Usage: input from message_start, output from the final message_delta.
    assert (result.input_tokens, result.output_tokens) == (30 + 9, 12 + 4)
    usage = [
        (e.data["input_tokens"], e.data["output_tokens"]) for e in seen if e.type == "llm.result"
    ]
    assert usage == [(30, 12), (9, 4)]


async def test_an_entry_that_always_streams_serves_a_run_that_does_not(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(stream_text("quiet"))
    kernel = make(stream=True)
    events = kernel.events.subscribe(buffer=float("inf"))
    result = await kernel.run("a", "hi")
    assert (result.status, result.reply) == ("completed", "quiet")
    assert anthropic_server.requests[0]["stream"] is True
    assert not [e for e in drain(events) if e.type == "text.delta"]


async def test_the_api_key_comes_from_the_named_environment_variable(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers.append(text("ok"))
    extra = "      api_key_env: TEST_ANTHROPIC_KEY\n"
    result = await make(extra=extra, environ={"TEST_ANTHROPIC_KEY": "sk-from-env"}).run("a", "hi")
    assert result.status == "completed"
    assert anthropic_server.headers[0]["x-api-key"] == "sk-from-env"
    with pytest.raises(UsageError) as info:
        await make(extra=extra).run("a", "hi")
    assert str(info.value) == (
        "llm.providers.claude.api_key_env: the environment variable TEST_ANTHROPIC_KEY is not set"
    )
    assert len(anthropic_server.requests) == 1


async def test_unparsable_streamed_tool_input_goes_back_to_the_model(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        stream_tool_use("t1", "weather", "{city: Oslo"),
        stream_text("sorry"),
    ]
    await make(stream=True).run("a", "hi", stream=True)
    (result_block,) = anthropic_server.requests[1]["messages"][-1]["content"]
    assert result_block["is_error"] is True
    assert "_unparsable_arguments: unexpected argument" in result_block["content"]
