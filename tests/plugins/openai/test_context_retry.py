"""After a server states its context limit, the single retry must fit.

The server here counts one token per character, as llama.cpp does with a character vocabulary
(the interop suite checks the same against the real llama-server): four times what the default
estimate of four characters a token says. It refuses, as llama.cpp does, with its ``n_ctx``
and the prompt's ``n_prompt_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest
import trio
from _support.openai_server import serve_asgi

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


def _prompt_tokens(body: dict[str, Any]) -> int:
    """One token a character of every message's text and tool calls."""
    total = 0
    for message in body["messages"]:
        total += len(message.get("content") or "") + 8  # a role's template, roughly
        for call in message.get("tool_calls") or ():
            total += len(call["function"]["arguments"]) + len(call["function"]["name"])
    return total + len(json.dumps(body.get("tools") or []))


@attrs.define
class CharacterServer:
    n_ctx: int
    prompts: list[int] = attrs.Factory(list)  # the prompt tokens of every request
    refused: int = 0
    base_url: str = ""

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        tokens = _prompt_tokens(json.loads(raw))
        self.prompts.append(tokens)
        if tokens > self.n_ctx:
            self.refused += 1
            status, body = (
                400,
                {
                    "error": {
                        "code": 400,
                        "message": f"request ({tokens} tokens) exceeds the available context size"
                        f" ({self.n_ctx} tokens), try increasing it",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": tokens,
                        "n_ctx": self.n_ctx,
                    }
                },
            )
        else:
            status, body = (
                200,
                {
                    "model": "chars",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "y" * 1500},
                        }
                    ],
                    "usage": {"prompt_tokens": tokens, "completion_tokens": 1500},
                },
            )
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})


@pytest.fixture
async def server(nursery: trio.Nursery) -> AsyncIterator[CharacterServer]:
    server = CharacterServer(n_ctx=4000)
    url, shutdown = await serve_asgi(nursery, server.app)
    server.base_url = url + "/v1"
    yield server
    shutdown.set()


@pytest.fixture
async def kernel(
    workspace: Workspace, make_kernel: Callable[..., Kernel], server: CharacterServer
) -> AsyncIterator[Kernel]:
    workspace.write_config(
        "llm:\n  providers:\n    local:\n      type: openai\n"
        f"      base_url: {server.base_url}\n      model: chars\n      max_output_tokens: 200\n"
    )
    workspace.write_agent("a", {"llm": {"provider": "local"}, "system_prompt": "Be brief."})
    kernel = make_kernel()
    yield kernel
    await kernel.aclose()


async def test_the_retry_after_a_stated_limit_fits_a_server_that_counts_more_tokens(
    kernel: Kernel, server: CharacterServer
) -> None:
    # Each reply is 1500 characters, so the conversation outgrows 4000 tokens on the third
    # run; the retry is compacted from the server's own count of the refused prompt.
    for n in range(8):
        result = await kernel.run("a", f"question {n}", session_id="s")
        assert result.status == "completed", (n, result.incomplete_reason, result.error)
    assert server.refused >= 1, "the conversation never outgrew the server's context"
    assert max(p for p in server.prompts if p <= server.n_ctx) <= server.n_ctx
    # Every refusal was followed by a request that fitted.
    for before, after in zip(server.prompts, server.prompts[1:], strict=False):
        if before > server.n_ctx:
            assert after <= server.n_ctx, server.prompts
