"""Open SSE streams are capped per principal (``server.max_streams_per_principal``): one key
cannot hold the connections that every other principal needs, a refused stream starts no run,
and a closed stream gives its slot back."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import Server, keyed_config, open_keyed_server

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace

LIMIT = {"scope": "streams", "max": 2, "key": "server.max_streams_per_principal"}
CAP_OF_TWO = "  max_streams_per_principal: 2\n"


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    async with open_keyed_server(workspace, make_kernel, CAP_OF_TWO) as running:
        yield running


async def _open(client: httpx.AsyncClient, method: str, path: str, **body: Any) -> httpx.Response:
    request = client.build_request(method, path, json=body or None)
    return await client.send(request, stream=True)


async def _slow_chat(client: httpx.AsyncClient, run_id: str) -> httpx.Response:
    return await _open(client, "POST", "/chat/stream", agent_id="slow", text="x", run_id=run_id)


async def test_a_principal_at_its_cap_is_refused_and_another_is_not(server: Server) -> None:
    held: list[httpx.Response] = []
    async with server.client("alice") as alice, server.client("bob") as bob:
        try:
            for run_id in ("alice-1", "alice-2"):
                held.append(await _slow_chat(alice, run_id))
                assert held[-1].status_code == 200
            refused = await alice.post(
                "/chat/stream", json={"agent_id": "echo", "text": "x", "run_id": "alice-3"}
            )
            assert refused.status_code == 429, refused.text
            assert refused.json()["limit"] == LIMIT
            assert refused.headers["retry-after"] == "1"
            # The refused stream started no run.
            assert (await alice.get("/runs/alice-3")).status_code == 404
            # At the cap, a request that is not valid is still told what is wrong with it.
            bad_type = await alice.post(
                "/chat/stream", content=b"x", headers={"content-type": "text/plain"}
            )
            assert bad_type.status_code == 415
            unknown = await alice.post("/chat/stream", json={"agent_id": "nobody", "text": "x"})
            assert unknown.status_code == 404
            # Watching a run is a stream too, even one's own run.
            watched = await alice.get("/runs/alice-1/events")
            assert watched.status_code == 429
            assert watched.json()["limit"] == LIMIT
            # Another principal is not held back by alice's streams, up to its own cap.
            for run_id in ("bob-1", "bob-2"):
                held.append(await _slow_chat(bob, run_id))
                assert held[-1].status_code == 200
            assert (await bob.get("/runs/alice-1/events")).status_code == 404  # not bob's
            # A non-streaming chat is no stream: alice may still ask and wait.
            answered = await alice.post("/chat", json={"agent_id": "echo", "text": "x"})
            assert answered.status_code == 200
            assert answered.json()["reply"] == "hello there"
            # The cap is read at each new stream: an admin's PATCH applies to the next one.
            async with server.client("root") as root:
                raised = await root.patch(
                    "/config", json={"changes": {"server": {"max_streams_per_principal": 3}}}
                )
                assert raised.status_code == 200, raised.text
                held.append(await _slow_chat(alice, "alice-3"))
                assert held[-1].status_code == 200
                assert (await alice.get("/runs/alice-1/events")).status_code == 429
                lowered = await root.patch(
                    "/config", json={"changes": {"server": {"max_streams_per_principal": 2}}}
                )
                assert lowered.status_code == 200, lowered.text
            await held.pop().aclose()
            # Closing a stream gives its slot back.
            await held.pop(0).aclose()
            with trio.fail_after(20):
                while True:
                    again = await _open(alice, "GET", "/runs/alice-1/events")
                    if again.status_code == 200:
                        held.append(again)
                        break
                    assert again.status_code == 429
                    await again.aclose()
                    await trio.sleep(0.05)
        finally:
            for response in held:
                await response.aclose()


async def test_zero_removes_the_cap(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    held: list[httpx.Response] = []
    uncapped = open_keyed_server(workspace, make_kernel, "  max_streams_per_principal: 0\n")
    async with uncapped as server, server.client("alice") as alice:
        try:
            for n in range(5):
                held.append(await _slow_chat(alice, f"alice-{n}"))
                assert held[-1].status_code == 200
        finally:
            for response in held:
                await response.aclose()


def test_a_negative_cap_names_the_key(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    config = keyed_config("  max_streams_per_principal: -1\n")
    workspace.write_config(config)
    with pytest.raises(ConfigError) as raised:
        make_kernel()
    message = str(raised.value)
    line = config.splitlines().index("  max_streams_per_principal: -1") + 1
    assert f"config.yaml:{line}:3" in message
    assert "server.max_streams_per_principal" in message
    assert "expected 0 or more" in message


async def test_a_leaked_events_token_cannot_take_its_owners_streams(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Whoever holds a run's events token URL (no key at all) may hold a tenth of the owner's
    cap open on that run, no more; the owner's key keeps the rest."""
    held: list[httpx.Response] = []
    cap = open_keyed_server(workspace, make_kernel, "  max_streams_per_principal: 20\n")
    async with cap as server, server.client("alice") as alice, server.client(None) as stranger:
        try:
            first = await _slow_chat(alice, "alice-1")
            token = first.headers["soulacy-events-token"]
            held.append(first)
            for _ in range(2):  # 20 // 10
                held.append(await _open(stranger, "GET", f"/runs/alice-1/events?token={token}"))
                assert held[-1].status_code == 200
            refused = await stranger.get(f"/runs/alice-1/events?token={token}")
            assert refused.status_code == 429
            assert refused.json()["limit"] == {
                "scope": "token_streams",
                "max": 2,
                "key": "server.max_streams_per_principal",
            }
            # A new token for the same run is the same run's share.
            again = (await alice.post("/runs/alice-1/token")).json()["token"]
            assert (await stranger.get(f"/runs/alice-1/events?token={again}")).status_code == 429
            # The owner's key is not held back, on that run or another.
            held.append(await _open(alice, "GET", "/runs/alice-1/events"))
            assert held[-1].status_code == 200
            held.append(await _slow_chat(alice, "alice-2"))
            assert held[-1].status_code == 200
        finally:
            for response in held:
                await response.aclose()
