"""Helpers of the A2A tests: the official ``a2a-sdk`` client against a real Soulacy server on
127.0.0.1 (the principals of tests/_support/http_server.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, StreamResponse

from soulacy.testing import Workspace


def agents(workspace: Workspace) -> None:
    """An agent that answers, one slow enough to cancel, one that does not complete (one turn,
    spent on a tool call) and a disabled one."""
    workspace.scripted_agent(
        "echo", [{"text": "hello there"}], repeat=True, description="Says hello."
    )
    workspace.scripted_agent(
        "slow", [{"text": "late", "sleep": 30}], repeat=True, description="Takes its time."
    )
    workspace.scripted_agent(
        "short",
        [{"tool": "missing", "arguments": {}}, {"text": "never said"}],
        repeat=True,
        max_turns=1,
    )
    workspace.scripted_agent("off", [{"text": "no"}], repeat=True, enabled=False)


def http(key: str | None, sent: list[str] | None = None) -> httpx.AsyncClient:
    """An HTTP client with the bearer ``key``; the JSON-RPC method of each request it sends is
    appended to ``sent``."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    async def note(request: httpx.Request) -> None:
        if sent is not None and request.method == "POST":
            sent.append(json.loads(request.content)["method"])

    hooks: dict[str, Any] = {"request": [note]}
    return httpx.AsyncClient(
        headers=headers, timeout=httpx.Timeout(30, read=120), event_hooks=hooks
    )


# The protocol versions the server speaks: the SDK's client speaks 0.3 (its compat transport)
# to an agent whose chosen interface says 0.3.
VERSIONS = ["1.0", "0.3"]


@asynccontextmanager
async def a2a_client(
    url: str,
    agent_id: str,
    key: str | None,
    *,
    streaming: bool = True,
    version: str = "1.0",
    sent: list[str] | None = None,
) -> AsyncIterator[Client]:
    """The SDK's client of ``agent_id``, from its card, with the bearer ``key``, speaking
    ``version`` (the card's interface of that version is the one it is given)."""
    async with http(key, sent) as client:
        card = await A2ACardResolver(client, f"{url}/api/v1/a2a/{agent_id}").get_agent_card()
        chosen = [i for i in card.supported_interfaces if i.protocol_version == version]
        assert chosen, f"the card offers no A2A {version} interface"
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(chosen)
        config = ClientConfig(httpx_client=client, streaming=streaming)
        async with ClientFactory(config).create(card) as a2a:
            yield a2a


def request(text: str, context_id: str = "", **configuration: Any) -> SendMessageRequest:
    message = Message(
        message_id="m-" + text.replace(" ", "-"),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
    )
    return SendMessageRequest(message=message, configuration=configuration or None)


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in stream]
