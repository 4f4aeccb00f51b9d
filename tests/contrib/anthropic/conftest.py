"""Fixtures of the anthropic contrib provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio
from _support.anthropic_server import FakeAnthropic, serve_asgi

from soulacy.kernel import Kernel, Tool
from soulacy.testing import Workspace, throwaway_plugin

PLUGIN = "soulacy.contrib.anthropic"


def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def flaky(city: str) -> str:
    """Always fails."""
    raise RuntimeError(f"no data for {city}")


@pytest.fixture
async def anthropic_server(nursery: trio.Nursery) -> AsyncIterator[FakeAnthropic]:
    """A Messages API server on 127.0.0.1 answering from ``server.answers``."""
    server = FakeAnthropic()
    url, shutdown = await serve_asgi(nursery, server.app)
    server.base_url = url
    yield server
    shutdown.set()


@pytest.fixture
async def make(
    workspace: Workspace, make_kernel: Callable[..., Kernel], anthropic_server: FakeAnthropic
) -> AsyncIterator[Callable[..., Kernel]]:
    """``make(stream=False, extra="", environ=None, **soul)``: a kernel whose agent ``a`` uses
    the anthropic provider (enabled in config.yaml) against the fake server."""
    kernels: list[Kernel] = []

    def make(
        stream: bool = False, extra: str = "", environ: dict[str, str] | None = None, **soul: Any
    ) -> Kernel:
        workspace.write_config(
            f"plugins:\n  enable: [{PLUGIN}]\n"
            "llm:\n  providers:\n    claude:\n      type: anthropic\n"
            f"      base_url: {anthropic_server.base_url}\n"
            + ("" if "api_key_env" in extra else "      api_key: sk-ant-test\n")
            + f"      model: claude-fake\n      stream: {str(stream).lower()}\n"
            "      max_retries: 2\n" + extra
        )
        workspace.write_agent(
            "a",
            {
                "llm": {"provider": "claude"},
                "tools": ["weather", "flaky"],
                "system_prompt": "Be brief.",
                **soul,
            },
        )
        tools = throwaway_plugin(
            "tools",
            soulacy_tools=lambda kernel, agent_id: [
                Tool.from_function(weather),
                Tool.from_function(flaky),
            ],
        )
        kernel = make_kernel(extra_plugins=[tools], environ=environ or {})
        kernels.append(kernel)
        return kernel

    yield make
    for kernel in kernels:
        await kernel.aclose()
