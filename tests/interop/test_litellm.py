"""The openai provider against a real LiteLLM proxy, offline, on its mock responses.

Each model group of the proxy answers one way: text, parallel tool calls, a 429, a context
window error, or text behind LiteLLM's own context-window check (``max_input_tokens``).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import trio
from _servers import MASTER_KEY, free_port, litellm_argv, running

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelRequest, ToolSpec
from soulacy.kernel.providers import ProviderConfig
from soulacy.plugins.openai import OpenAIProvider
from soulacy.testing import Workspace, throwaway_plugin

pytestmark = pytest.mark.interop

TEXT = "Hello from the mock"
CALLS = [
    {
        "id": "call_a",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    },
    {
        "id": "call_b",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Bergen"}'},
    },
]
SMALL_LIMIT = 800  # max_input_tokens of the "small" group, which LiteLLM itself enforces


def _group(name: str, model: str = "openai/mock-model", **params: Any) -> dict[str, Any]:
    return {"model_name": name, "litellm_params": {"model": model, "api_key": "sk-none", **params}}


def _config() -> dict[str, Any]:
    small = _group("small", "openai/small-model", mock_response="fits")
    small["model_info"] = {"max_input_tokens": SMALL_LIMIT}
    return {
        "model_list": [
            _group("text", mock_response=TEXT),
            _group("tools", mock_tool_calls=CALLS),
            _group("ratelimited", mock_response="litellm.RateLimitError"),
            _group("toolong", mock_response="litellm.ContextWindowExceededError"),
            small,
        ],
        "router_settings": {"enable_pre_call_checks": True},
        "litellm_settings": {"num_retries": 0},  # the provider retries, not the proxy
        "general_settings": {"master_key": MASTER_KEY},
    }


@pytest.fixture(scope="session")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a LiteLLM proxy on a free port."""
    if importlib.util.find_spec("litellm") is None:  # not imported here: it is the proxy's
        pytest.skip("litellm is not installed (pip install -e '.[interop]')")
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.json"  # YAML is a superset of JSON: the proxy reads it
    config.write_text(json.dumps(_config()))
    port = free_port()
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}
    with running(
        litellm_argv(config, port),
        ready_url=f"http://127.0.0.1:{port}/health/liveliness",
        log=folder / "proxy.log",
        env=env,
        timeout=240,
    ):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture
async def provider(proxy: str) -> AsyncIterator[Callable[..., OpenAIProvider]]:
    made: list[OpenAIProvider] = []

    def make(model: str, **config: Any) -> OpenAIProvider:
        entry = ProviderConfig(
            type="openai", base_url=proxy, api_key=MASTER_KEY, model=model, **config
        )
        made.append(OpenAIProvider("litellm", entry))
        return made[-1]

    yield make
    for p in made:
        await p.aclose()


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


WEATHER = ToolSpec("weather", "The weather in a city.", Tool.from_function(weather).parameters)


@pytest.fixture
async def make(
    workspace: Workspace, make_kernel: Callable[..., Kernel], proxy: str
) -> AsyncIterator[Callable[..., Kernel]]:
    kernels: list[Kernel] = []

    def make(model: str, extra: str = "", **agent: Any) -> Kernel:
        workspace.write_config(
            "llm:\n  providers:\n    litellm:\n      type: openai\n"
            f"      base_url: {proxy}\n      api_key: {MASTER_KEY}\n      model: {model}\n"
            "      max_retries: 2\n" + extra
        )
        workspace.write_agent("a", {"llm": {"provider": "litellm"}, "tools": ["weather"], **agent})
        tools = throwaway_plugin(
            "tools", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(weather)]
        )
        kernels.append(make_kernel(extra_plugins=[tools]))
        return kernels[-1]

    yield make
    for kernel in kernels:
        await kernel.aclose()


async def test_a_text_reply_with_its_usage(provider: Callable[..., OpenAIProvider]) -> None:
    reply = await provider("text").complete(ModelRequest([Message("user", "hi")]))
    assert (reply.message.content, reply.finish_reason) == (TEXT, "stop")
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0


async def test_a_streamed_reply_arrives_in_deltas_and_ends_with_usage(
    provider: Callable[..., OpenAIProvider],
) -> None:
    deltas: list[str] = []

    async def sink(delta: str) -> None:
        deltas.append(delta)

    request = ModelRequest([Message("user", "hi")], stream=True)
    reply = await provider("text").complete(request, sink)
    assert len(deltas) > 1
    assert "".join(deltas) == reply.message.content == TEXT
    assert reply.usage.input_tokens > 0
    assert reply.usage.output_tokens > 0


async def test_parallel_tool_calls_are_read_in_order(
    provider: Callable[..., OpenAIProvider],
) -> None:
    # (LiteLLM's mock streams only the text of a reply: streamed tool calls are checked
    # against llama.cpp's server.)
    request = ModelRequest([Message("user", "weather?")], tools=[WEATHER])
    reply = await provider("tools").complete(request, None)
    calls = [(c.id, c.name, dict(c.arguments)) for c in reply.message.tool_calls]
    assert calls == [
        ("call_a", "weather", {"city": "Oslo"}),
        ("call_b", "weather", {"city": "Bergen"}),
    ]


async def test_a_run_sends_both_tool_results_back_and_the_proxy_accepts_them(
    make: Callable[..., Kernel],
) -> None:
    # The mock calls tools on every turn: two turns prove the history with tool results passed.
    result = await make("tools", max_turns=2).run("a", "weather in Oslo and Bergen?")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns")
    assert (result.llm_calls, result.tool_calls) == (2, 2)  # the second turn's calls: not run


async def test_a_429_is_retried_with_backoff_then_reported(
    make: Callable[..., Kernel],
) -> None:
    kernel = make("ratelimited")
    started = trio.current_time()
    result = await kernel.run("a", "hi")
    waited = trio.current_time() - started
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert "answered 429" in (result.error or "")
    assert waited >= 0.5 + 1.0  # max_retries 2: the default backoff, twice


async def test_a_context_window_error_is_a_context_length_stop_not_a_provider_error(
    make: Callable[..., Kernel],
) -> None:
    result = await make("toolong").run("a", "hi")
    assert (result.status, result.incomplete_reason) == ("failed", "context_length")
    assert "ContextWindowExceededError" in (result.error or "")


async def test_after_litellm_states_its_limit_the_one_retry_fits(
    make: Callable[..., Kernel],
) -> None:
    # Digits cost LiteLLM's tokenizer about a token for every two characters: twice what the
    # default estimate says. Each question is ~105 tokens, so the seventh run outgrows 800. (The
    # mock reports 10 prompt tokens whatever it is sent: only the refusal's count is true.)
    kernel = make("small", "      max_output_tokens: 20\n", system_prompt="Be brief.")
    refused = 0
    for n in range(10):
        question = f"question {n}: " + " ".join(str(d % 10) for d in range(100))
        result = await kernel.run("a", question, session_id="s")
        assert (result.status, result.reply) == ("completed", "fits"), result.error
        refused += result.llm_calls - 1  # a refused call, then the retry that fitted
    print(f"LiteLLM refused {refused} of 10 runs; every retry fitted")
    assert refused >= 2
