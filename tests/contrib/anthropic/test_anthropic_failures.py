"""Retries, refusals and context-length errors of the anthropic provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from _support.anthropic_server import (
    Answer,
    FakeAnthropic,
    error,
    stream_dropped,
    stream_error,
    stream_text,
    text,
)

from soulacy.contrib.anthropic import AnthropicProvider
from soulacy.kernel import Kernel, UsageError
from soulacy.kernel.messages import Message, ModelRequest
from soulacy.kernel.providers import ContextLengthExceeded, ProviderConfig, ProviderError

TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum"
OVERLOADED = ("overloaded_error", "Overloaded")


@pytest.fixture
async def provider(anthropic_server: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    config = ProviderConfig(type="anthropic", base_url=anthropic_server.base_url, model="m")
    provider = AnthropicProvider("p", config, environ={})
    yield provider
    await provider.aclose()


async def test_429_and_529_are_retried_honouring_retry_after(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        error(429, "rate_limit_error", "slow down", {"Retry-After": "1"}),
        error(529, *OVERLOADED, {"retry-after": "0"}),
        text("finally"),
    ]
    kernel = make()
    result = await kernel.run("a", "hi")
    assert (result.status, result.reply) == ("completed", "finally")
    assert len(anthropic_server.requests) == 3
    # Waited as asked (1 s, then none), not by the default backoff (0.5 s, then 1 s): each gap
    # rules one default out, with all of a loaded machine's slack on the side that passes.
    first, second, third = anthropic_server.arrived
    assert second - first >= 1.0
    assert third - second < 1.0


async def test_retries_give_up_with_a_failed_run_naming_the_error(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [error(529, *OVERLOADED, {"Retry-After": "0"}) for _ in range(3)]
    result = await make().run("a", "hi")
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert result.error == "provider 'claude' answered 529: overloaded_error: Overloaded"
    assert len(anthropic_server.requests) == 3  # max_retries: 2


@pytest.mark.parametrize(
    ("status", "kind"), [(400, "invalid_request_error"), (401, "authentication_error")]
)
async def test_a_client_error_is_not_retried(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic, status: int, kind: str
) -> None:
    anthropic_server.answers += [error(status, kind, "roles must alternate"), text("never")]
    result = await make().run("a", "hi")
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert result.error == f"provider 'claude' answered {status}: {kind}: roles must alternate"
    assert len(anthropic_server.requests) == 1


@pytest.mark.parametrize(
    ("message", "limit", "requested"),
    [
        (TOO_LONG, 200000, 210000),
        (
            "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000,"
            " decrease input length or `max_tokens` and try again",
            200000,
            188240 + 21333,
        ),
        ("prompt is too long", None, None),
    ],
)
async def test_a_context_length_error_carries_the_stated_limit(
    provider: AnthropicProvider,
    anthropic_server: FakeAnthropic,
    message: str,
    limit: int | None,
    requested: int | None,
) -> None:
    anthropic_server.answers += [error(400, "invalid_request_error", message), text("never")]
    with pytest.raises(ContextLengthExceeded) as info:
        await provider.complete(ModelRequest([Message("user", "x" * 100)]))
    assert (info.value.limit, info.value.requested) == (limit, requested)
    assert str(info.value) == f"provider 'p' answered 400: invalid_request_error: {message}"
    assert len(anthropic_server.requests) == 1  # the engine retries it, not the provider


async def test_the_engine_retries_once_after_a_context_length_error(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    too_long = error(400, "invalid_request_error", TOO_LONG)
    anthropic_server.answers += [too_long, text("fits now")]
    result = await make(extra="      max_output_tokens: 512\n").run("a", "hi")
    assert (result.status, result.reply) == ("completed", "fits now")
    assert [r["max_tokens"] for r in anthropic_server.requests] == [512, 512]
    anthropic_server.answers += [too_long, too_long]
    result = await make(extra="      max_output_tokens: 512\n").run("a", "hi again")
    assert (result.status, result.incomplete_reason) == ("failed", "context_length")
    assert "200000" in (result.error or "")
    assert len(anthropic_server.requests) == 4


async def test_a_streamed_request_is_retried_on_an_error_status(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [
        error(529, *OVERLOADED, {"Retry-After": "0"}),
        stream_text("ok"),
    ]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.reply) == ("completed", "ok")
    assert len(anthropic_server.requests) == 2


async def test_an_error_event_before_any_text_is_retried(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [stream_error("overloaded_error"), stream_text("ok")]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.reply) == ("completed", "ok")
    assert len(anthropic_server.requests) == 2


async def test_an_error_event_after_text_was_shown_is_not_retried(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [stream_error("overloaded_error", "Half a"), stream_text("ok")]
    kernel = make(stream=True)
    events = kernel.events.subscribe(buffer=float("inf"))
    result = await kernel.run("a", "hi", stream=True)
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert result.error == "provider 'claude' failed mid-stream: overloaded_error: Overloaded"
    assert len(anthropic_server.requests) == 1
    deltas = []
    while True:
        try:
            event = events.receive_nowait()
        except trio.WouldBlock:
            break
        if event.type == "text.delta":
            deltas.append(event.data["text"])
    assert deltas == ["Half a"]


async def test_a_dropped_connection_is_retried_then_reported() -> None:
    config = ProviderConfig(
        type="anthropic", base_url="http://127.0.0.1:9", model="m", max_retries=1
    )
    provider = AnthropicProvider("p", config, environ={})
    try:
        with pytest.raises(ProviderError, match="provider 'p': ConnectError"):
            await provider.complete(ModelRequest([Message("user", "x")]))
    finally:
        await provider.aclose()


def test_an_api_key_variable_that_is_not_set_is_a_clear_error() -> None:
    config = ProviderConfig(type="anthropic", api_key_env="NOPE_KEY")
    with pytest.raises(UsageError, match="the environment variable NOPE_KEY is not set"):
        AnthropicProvider("p", config, environ={})


async def test_a_request_without_a_model_is_a_clear_error(anthropic_server: FakeAnthropic) -> None:
    provider = AnthropicProvider(
        "p", ProviderConfig(type="anthropic", base_url=anthropic_server.base_url), environ={}
    )
    try:
        with pytest.raises(ProviderError, match=r"set llm\.providers\.p\.model or the agent's"):
            await provider.complete(ModelRequest([Message("user", "x")]))
    finally:
        await provider.aclose()
    assert anthropic_server.requests == []


async def test_a_stream_cut_before_any_text_is_retried(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [stream_dropped(), stream_text("ok")]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.reply) == ("completed", "ok")
    assert len(anthropic_server.requests) == 2


async def test_a_stream_cut_after_text_was_shown_is_not_retried(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    anthropic_server.answers += [stream_dropped("Half a"), stream_text("ok")]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert (result.error or "").startswith("provider 'claude': RemoteProtocolError")
    assert len(anthropic_server.requests) == 1


async def test_a_stream_that_ends_before_message_stop_is_an_error(
    make: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> None:
    unfinished = stream_text().events or []
    anthropic_server.answers += [Answer(events=unfinished[:-1]), stream_text("ok")]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert (result.status, result.reply) == ("completed", "ok")  # no text yet: retried
    anthropic_server.answers += [Answer(events=(stream_text("Half").events or [])[:-1])]
    result = await make(stream=True).run("a", "hi", stream=True)
    assert result.error == "provider 'claude': the stream ended before message_stop"
    assert len(anthropic_server.requests) == 3
