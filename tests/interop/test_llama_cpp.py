"""The openai provider against llama.cpp's ``llama-server`` running a tiny generated model.

The model (``_tinymodel``) prefers tokens the test chooses, so what the server answers is known:
text is one character repeated until ``max_tokens``; with tools, it opens a ``<tool_call>``
and llama-server's grammar and parser make it a JSON tool call with empty strings for values.
Its vocabulary is a byte each, so the server counts about four times the tokens that the
default estimate of four characters a token says: the case where a retry after a context-length
refusal overflowed again.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _servers import free_port, running

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelRequest, ToolCall, ToolSpec
from soulacy.kernel.providers import ProviderConfig
from soulacy.plugins.openai import OpenAIProvider
from soulacy.testing import Workspace, throwaway_plugin

pytestmark = pytest.mark.interop

# What each model prefers: first, and after a given token (see _tinymodel.write_model).
_OPEN = ("<tool_call>", '"', "{", "</tool_call>", "}", ":", ",", "<|im_end|>")
_IN_JSON = {'"': ('"', "}", ":", ",", "<|im_end|>")}  # an empty string, then what follows it
MODELS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "text": (("o", "<|im_end|>"), {}),  # says "ooo…" until max_tokens
    "tool": (_OPEN, {**_IN_JSON, "</tool_call>": ("<|im_end|>",)}),  # one call, then stops
    "tools": (_OPEN, _IN_JSON),  # opens another call whenever it may: max_tokens ends it
}
SMALL_CTX = 768


@pytest.fixture(scope="session")
def llama_binary() -> Path:
    import os

    import _llama

    found = _llama.find_server()
    if found is None:
        if os.environ.get("SOULACY_INTEROP_BUILD") == "0":
            pytest.skip("no llama-server and SOULACY_INTEROP_BUILD=0")
        if not (shutil.which("cmake") and (shutil.which("c++") or shutil.which("g++"))):
            pytest.skip("no llama-server, and no cmake and C++ compiler to build one")
        found, seconds = _llama.build_server()
        print(f"built llama-server in {seconds:.0f} s")
    return found


@pytest.fixture(scope="session")
def llama(
    llama_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., str]]:
    """``llama(model, ctx)``: the base URL of a llama-server running the tiny model ``model``
    of ``MODELS`` with a context of ``ctx`` tokens (started once per pair)."""
    pytest.importorskip("gguf", reason="the interop extra is not installed")
    import _tinymodel

    folder = tmp_path_factory.mktemp("llama")
    started: dict[tuple[str, int], str] = {}
    with contextlib.ExitStack() as stack:

        def serve(name: str, ctx: int = 4096) -> str:
            key = (name, ctx)
            if key not in started:
                n = len(started)
                preferred, after = MODELS[name]
                model = _tinymodel.write_model(folder / f"{name}-{n}.gguf", preferred, after)
                port = free_port()
                argv = [
                    str(llama_binary), "-m", str(model), "--host", "127.0.0.1",
                    "--port", str(port), "-c", str(ctx), "-np", "1", "-t", "1", "--jinja",
                ]  # fmt: skip
                stack.enter_context(
                    running(
                        argv,
                        ready_url=f"http://127.0.0.1:{port}/health",
                        log=folder / f"server{n}.log",
                        timeout=120,
                    )
                )
                started[key] = f"http://127.0.0.1:{port}/v1"
            return started[key]

        yield serve


@pytest.fixture
async def provider(llama: Callable[..., str]) -> AsyncIterator[Callable[..., OpenAIProvider]]:
    made: list[OpenAIProvider] = []

    def make(name: str, **config: Any) -> OpenAIProvider:
        entry = ProviderConfig(type="openai", base_url=llama(name), model="tiny", **config)
        made.append(OpenAIProvider("llama", entry))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city or 'no city'}"


WEATHER = ToolSpec("weather", "The weather in a city.", Tool.from_function(weather).parameters)


@pytest.fixture
async def make(
    workspace: Workspace, make_kernel: Callable[..., Kernel], llama: Callable[..., str]
) -> AsyncIterator[Callable[..., Kernel]]:
    kernels: list[Kernel] = []

    def make(name: str, ctx: int = 4096, extra: str = "", **agent: Any) -> Kernel:
        workspace.write_config(
            "llm:\n  providers:\n    llama:\n      type: openai\n"
            f"      base_url: {llama(name, ctx)}\n      model: tiny\n" + extra
        )
        workspace.write_agent("a", {"llm": {"provider": "llama"}, "tools": ["weather"], **agent})
        tools = throwaway_plugin(
            "tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(weather)]
        )
        kernels.append(make_kernel(extra_plugins=[tools]))
        return kernels[-1]

    yield make
    for kernel in kernels:
        await kernel.aclose()


async def test_a_text_reply_with_its_usage(provider: Callable[..., OpenAIProvider]) -> None:
    request = ModelRequest([Message("user", "hi")], max_output_tokens=8)
    reply = await provider("text").complete(request)
    assert (reply.message.content, reply.finish_reason) == ("o" * 8, "length")
    assert reply.usage.output_tokens == 8
    assert reply.usage.input_tokens >= len("hi")


async def test_a_streamed_reply_arrives_token_by_token_with_usage(
    provider: Callable[..., OpenAIProvider],
) -> None:
    deltas: list[str] = []

    async def sink(delta: str) -> None:
        deltas.append(delta)

    request = ModelRequest([Message("user", "hi")], max_output_tokens=6, stream=True)
    reply = await provider("text").complete(request, sink)
    assert deltas == ["o"] * 6
    assert reply.message.content == "oooooo"
    assert reply.usage.output_tokens == 6


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_tool_call_is_parsed_by_the_server_and_read(
    provider: Callable[..., OpenAIProvider], stream: bool
) -> None:
    request = ModelRequest(
        [Message("user", "weather?")], tools=[WEATHER], max_output_tokens=60, stream=stream
    )
    reply = await provider("tool").complete(request, None)
    [call] = reply.message.tool_calls
    assert (call.name, dict(call.arguments)) == ("weather", {"city": ""})
    assert call.id
    assert reply.finish_reason == "tool_calls"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_parallel_tool_calls_come_in_order_with_their_own_ids(
    provider: Callable[..., OpenAIProvider], stream: bool
) -> None:
    # The model opens another <tool_call> whenever it may: max_tokens ends it after two.
    one = await provider("tool").complete(
        ModelRequest([Message("user", "w")], tools=[WEATHER], max_output_tokens=60)
    )
    per_call = one.usage.output_tokens - 1  # the end-of-turn token is counted too
    request = ModelRequest(
        [Message("user", "w")], tools=[WEATHER], max_output_tokens=2 * per_call, stream=stream
    )
    reply = await provider("tools").complete(request, None)
    calls = reply.message.tool_calls
    assert [(c.name, dict(c.arguments)) for c in calls] == [("weather", {"city": ""})] * 2
    assert len({c.id for c in calls}) == 2


async def test_a_run_sends_the_tool_results_back_and_the_server_accepts_them(
    make: Callable[..., Kernel],
) -> None:
    result = await make("tool", max_turns=2, extra="      max_output_tokens: 60\n").run("a", "w?")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns"), result.error
    assert result.llm_calls == 2
    assert result.tool_calls >= 1


async def test_infinity_in_sent_arguments_is_what_broke_the_server_and_is_not_sent(
    llama: Callable[..., str], provider: Callable[..., OpenAIProvider]
) -> None:
    url = llama("text") + "/chat/completions"
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "w?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "error"},
    ]
    call["function"]["arguments"] = json.dumps({"city": math.inf})  # what used to be sent
    async with httpx.AsyncClient() as client:
        broken = await client.post(url, json={"messages": history, "max_tokens": 2})
    assert broken.status_code >= 400, broken.text  # llama-server cannot read it
    sent = ToolCall("c1", "weather", {"city": math.inf})
    messages = [
        Message("user", "w?"),
        Message("assistant", "", tool_calls=(sent,)),
        Message("tool", "error", tool_call_id="c1", name="weather", is_error=True),
    ]
    reply = await provider("text").complete(ModelRequest(messages, max_output_tokens=2))
    assert reply.message.content == "oo"


async def test_after_the_server_states_its_limit_the_one_retry_fits(
    make: Callable[..., Kernel],
) -> None:
    # One token a byte: the default estimate says a quarter of what llama.cpp counts.
    extra = "      max_output_tokens: 8\n"
    kernel = make("text", SMALL_CTX, extra, system_prompt="Be brief.", tools=[])
    refused = 0
    for n in range(12):
        question = f"question {n}: " + "what is the weather like today? " * 3
        result = await kernel.run("a", question, session_id="s")
        assert (result.status, result.reply) == ("completed", "o" * 8), result.error
        refused += result.llm_calls - 1  # a refused call, then the retry that fitted
    print(f"llama.cpp refused {refused} of 12 runs; every retry fitted")
    assert refused >= 3
