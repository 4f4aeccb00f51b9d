"""One run id names one run: concurrent starts with the same id never cross; caps are 429."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio
from _support.http_server import Server, keyed_config, open_server, sse_events, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


async def _race(server: Server, who: tuple[str, str], run_id: str) -> list[Any]:
    answers: list[Any] = [None, None]

    async def start(i: int) -> None:
        async with server.client(who[i]) as client:
            response = await client.post(
                "/chat/stream",
                json={
                    "agent_id": "pause",
                    "text": f"private text of {who[i]} {i}",
                    "run_id": run_id,
                },
            )
            answers[i] = (who[i], i, response.status_code, response.text)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(start, 0)
        nursery.start_soon(start, 1)
    return answers


def _check_one_run(text: str, principal: str, i: int, run_id: str) -> None:
    events = sse_events(text)
    names = [e["event"] for e in events]
    assert names.count("run") == 1, names
    assert names.count("result") == 1, names
    assert names[-1] == "result"
    assert {e["data"]["run_id"] for e in events if "run_id" in e["data"]} == {run_id}
    ids = [e["id"] for e in events]
    assert ids == sorted(set(ids)), ids


@pytest.mark.parametrize(
    ("who", "pairs", "loser"), [(("alice", "bob"), 50, 404), (("alice", "alice"), 20, 409)]
)
async def test_concurrent_starts_with_one_run_id_make_one_run(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    who: tuple[str, str],
    pairs: int,
    loser: int,
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with open_server(make_kernel) as server:
        results: list[list[Any]] = []

        async def pair() -> None:
            results.append(await _race(server, who, f"race-{uuid.uuid4().hex}"))

        async with trio.open_nursery() as nursery:
            for _ in range(pairs):
                nursery.start_soon(pair)
        for answers in results:
            statuses = sorted(a[2] for a in answers)
            assert statuses == sorted([200, loser]), answers
            winner = next(a for a in answers if a[2] == 200)
            other = next(a for a in answers if a[2] != 200)
            run_id = sse_events(winner[3])[0]["data"]["run_id"]
            _check_one_run(winner[3], winner[0], winner[1], run_id)
            assert "private text" not in other[3]
            store = server.kernel.store()
            record = await store.get_run(run_id)
            assert record is not None
            assert record.principal == winner[0]


async def test_a_capacity_error_is_a_429_with_retry_after(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config("runtime:\n  max_concurrent_sessions_per_principal: 1\n"))
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):

        async def hold() -> None:
            await alice.post("/chat", json={"agent_id": "slow", "text": "x", "run_id": "cap-1"})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.sleep(0.5)
            refused = await alice.post(
                "/chat", json={"agent_id": "echo", "text": "x", "run_id": "cap-2"}
            )
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["limit"] == {
                "scope": "principal",
                "max": 1,
                "key": "runtime.max_concurrent_sessions_per_principal",
            }
            # The cap is per principal: bob is served meanwhile.
            assert (await bob.post("/chat", json={"agent_id": "echo", "text": "x"})).is_success
            assert (await alice.get("/runs/cap-2")).status_code == 404  # nothing started
            server.kernel.cancel_run("cap-1")
