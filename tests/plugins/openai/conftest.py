"""Fixtures of the openai provider tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
from _support.openai_server import FakeOpenAI, serve_asgi


@pytest.fixture
async def openai_server(nursery: trio.Nursery) -> AsyncIterator[FakeOpenAI]:
    """A Chat Completions server on 127.0.0.1 answering from ``server.answers``."""
    server = FakeOpenAI()
    url, shutdown = await serve_asgi(nursery, server.app)
    server.base_url = url + "/v1"
    yield server
    shutdown.set()
