"""The openai provider against a real local server speaking Chat Completions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio
from _support.openai_server import Answer, FakeOpenAI, text, tool_call

from soulacy.kernel import Event, Kernel, Tool
from soulacy.kernel.messages import Message, ModelRequest, ToolCall
from soulacy.kernel.providers import ContextLengthExceeded, ProviderConfig, ProviderError
from soulacy.plugins.openai import OpenAIProvider
from soulacy.testing import Workspace, throwaway_plugin


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
async def make(
    workspace: Workspace, make_kernel: Callable[..., Kernel], openai_server: FakeOpenAI
) -> AsyncIterator[Callable[..., Kernel]]:
    kernels: list[Kernel] = []

    def make(stream: bool = False, extra: str = "", **agent: Any) -> Kernel:
        workspace.write_config(
            "llm:\n  providers:\n    local:\n      type: openai\n"
            f"      base_url: {openai_server.base_url}\n      api_key: sk-test\n"
            f"      model: fake-model\n      stream: {str(stream).lower()}\n      max_retries: 2\n"
            + extra
        )
        workspace.write_agent(
            "a",
            {
                "llm": {"provider": "local"},
                "tools": ["weather"],
                "system_prompt": "Be brief.",
                **agent,
            },
        )
        tools = throwaway_plugin(
            "tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(weather)]
        )
        kernel = make_kernel(extra_plugins=[tools])
        kernels.append(kernel)
        return kernel

    yield make
    for kernel in kernels:
        await kernel.aclose()


async def test_a_tool_call_round_trip_over_the_wire(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [
        tool_call("call_1", "weather", '{"city": "Oslo"}'),
        text("It is sunny in Oslo.", prompt=40, completion=6),
    ]
    result = await make().run("a", "Weather in Oslo?")
    assert (result.status, result.reply) == ("completed", "It is sunny in Oslo.")
    assert (result.input_tokens, result.output_tokens) == (60, 14)
    first, second = openai_server.requests
    assert first["model"] == "fake-model"
    assert first["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert first["tools"][0]["function"]["name"] == "weather"
    assert first["tools"][0]["function"]["parameters"]["required"] == ["city"]
    assert first["max_tokens"] == 16384  # the resolved per-response allowance
    assert "top_p" not in first  # nucleus sampling is left to the provider
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny in Oslo",
    }
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert openai_server.headers[0]["authorization"] == "Bearer sk-test"


async def test_streaming_deltas_and_streamed_tool_calls(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"model": "fake", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    openai_server.answers += [
        Answer(
            chunks=[
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c9",
                                "function": {"name": "weather", "arguments": '{"ci'},
                            }
                        ]
                    }
                ),
                chunk(
                    {"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Rome"}'}}]},
                    "tool_calls",
                ),
                {
                    "model": "fake",
                    "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 4},
                },
            ]
        ),
        Answer(chunks=[chunk({"content": "Sunny "}), chunk({"content": "in Rome."}, "stop")]),
    ]
    kernel = make(stream=True)
    events = kernel.events.subscribe(buffer=float("inf"))
    result = await kernel.run("a", "Rome?", stream=True)
    assert (result.status, result.reply) == ("completed", "Sunny in Rome.")
    assert openai_server.requests[0]["stream"] is True
    assert openai_server.requests[0]["stream_options"] == {"include_usage": True}
    seen: list[Event] = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            break
    assert [e.data["text"] for e in seen if e.type == "text.delta"] == ["Sunny ", "in Rome."]
    (tool_result,) = [e.data for e in seen if e.type == "tool.result"]
    assert tool_result["preview"] == "sunny in Rome"
    assert result.input_tokens == 9


async def test_429_and_5xx_are_retried_honouring_retry_after(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [
        Answer({"error": {"message": "slow down"}}, 429, {"Retry-After": "0"}),
        Answer({"error": {"message": "oops"}}, 503),
        text("finally"),
    ]
    result = await make().run("a", "hi")
    assert (result.status, result.reply) == ("completed", "finally")
    assert len(openai_server.requests) == 3


async def test_retries_give_up_with_a_failed_run_naming_the_provider_error(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [
        Answer({"error": {"message": "down"}}, 500, {"Retry-After": "0"}) for _ in range(3)
    ]
    result = await make().run("a", "hi")
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert result.error == "provider 'local' answered 500: down"


async def test_a_client_error_is_not_retried(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [Answer({"error": {"message": "bad key"}}, 401), text("never")]
    result = await make().run("a", "hi")
    assert result.status == "failed"
    assert len(openai_server.requests) == 1


async def test_a_context_length_error_carries_the_servers_actual_limit(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.answers.append(
        Answer(
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens."
                    " However, your messages resulted in 5000 tokens.",
                    "code": "context_length_exceeded",
                }
            },
            400,
        )
    )
    provider = OpenAIProvider("p", ProviderConfig(type="openai", base_url=openai_server.base_url))
    try:
        with pytest.raises(ContextLengthExceeded) as info:
            await provider.complete(ModelRequest([Message("user", "x" * 100)]))
    finally:
        await provider.aclose()
    assert (info.value.limit, info.value.requested) == (4096, 5000)


async def test_the_engine_retries_once_after_a_context_length_error(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    error = Answer(
        {
            "error": {
                "message": "maximum context length is 4096 tokens",
                "code": "context_length_exceeded",
            }
        },
        400,
    )
    openai_server.answers += [error, text("fits now")]
    # The retry compacts to the reported limit minus the output reservation.
    result = await make(extra="      max_output_tokens: 512\n").run("a", "hi")
    assert (result.status, result.reply) == ("completed", "fits now")
    openai_server.answers += [error, error]
    result = await make(extra="      max_output_tokens: 512\n").run("a", "hi again")
    assert (result.status, result.incomplete_reason) == ("failed", "context_length")
    assert "4096" in (result.error or "")


async def test_unparsable_tool_arguments_go_back_to_the_model(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [tool_call("c1", "weather", "{city: Oslo"), text("sorry")]
    await make().run("a", "hi")
    tool_message = openai_server.requests[1]["messages"][-1]
    assert tool_message["content"].startswith("error: invalid arguments:")
    assert "_unparsable_arguments: unexpected argument" in tool_message["content"]


def test_an_api_key_variable_that_is_not_set_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="the environment variable NOPE_KEY is not set"):
        OpenAIProvider("p", ProviderConfig(type="openai", api_key_env="NOPE_KEY"), environ={})


async def test_a_dropped_connection_is_retried_then_reported(openai_server: FakeOpenAI) -> None:
    provider = OpenAIProvider(
        "p", ProviderConfig(type="openai", base_url="http://127.0.0.1:9/v1", max_retries=0)
    )
    try:
        with pytest.raises(ProviderError, match="provider 'p': ConnectError"):
            await provider.complete(ModelRequest([Message("user", "x")]))
    finally:
        await provider.aclose()


async def test_a_streamed_request_is_retried_on_429_too(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    openai_server.answers += [
        Answer({"error": {"message": "slow down"}}, 429, {"Retry-After": "0"}),
        Answer(
            chunks=[
                {
                    "model": "fake",
                    "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
                }
            ]
        ),
    ]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.reply) == ("completed", "ok")
    assert len(openai_server.requests) == 2


def _strict_json(text: str) -> Any:
    """``json.loads`` as a strict server parses: no NaN, no Infinity, no overflow to inf."""

    def refuse(literal: str) -> Any:
        raise ValueError(f"{literal} is not JSON")

    def finite(literal: str) -> float:
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{literal} overflows a double")
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


async def test_a_non_finite_tool_argument_is_shown_to_the_model_and_the_run_goes_on(
    make: Callable[..., Kernel], openai_server: FakeOpenAI
) -> None:
    # A model wrote 1e999; sent back as Infinity, llama.cpp's server answered 500 until the
    # run failed. The call gets an error result and the history stays valid JSON.
    openai_server.answers += [tool_call("c1", "weather", '{"city": 1e999}'), text("sorry")]
    result = await make().run("a", "hi")
    assert (result.status, result.reply) == ("completed", "sorry")
    assistant, tool_message = openai_server.requests[1]["messages"][-2:]
    arguments = assistant["tool_calls"][0]["function"]["arguments"]
    assert _strict_json(arguments) == {"_not_a_finite_number": "city: 1e999"}
    assert tool_message["content"].startswith("error: invalid arguments:")
    assert "_not_a_finite_number" in tool_message["content"]
    _strict_json(json.dumps(openai_server.requests[1]))


async def test_history_with_a_non_finite_argument_is_sent_as_valid_json(
    openai_server: FakeOpenAI,
) -> None:
    # Arguments that did not come through the parser (a scripted or stored conversation).
    openai_server.answers.append(text("ok"))
    provider = OpenAIProvider("p", ProviderConfig(type="openai", base_url=openai_server.base_url))
    call = ToolCall("c1", "weather", {"city": float("nan")})
    history = [Message("user", "hi"), Message("assistant", "", tool_calls=(call,))]
    try:
        await provider.complete(ModelRequest(history))
    finally:
        await provider.aclose()
    arguments = openai_server.requests[0]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert _strict_json(arguments) == {"_not_a_finite_number": "city: nan"}


async def test_a_body_that_cannot_be_json_is_a_clear_error_and_is_not_sent(
    openai_server: FakeOpenAI,
) -> None:
    provider = OpenAIProvider("p", ProviderConfig(type="openai", base_url=openai_server.base_url))
    request = ModelRequest([Message("user", "hi")], temperature=float("nan"))
    try:
        with pytest.raises(ProviderError, match=r"not valid JSON.*not a finite number"):
            await provider.complete(request)
    finally:
        await provider.aclose()
    assert openai_server.requests == []
