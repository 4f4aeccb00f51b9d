"""Browser-usable stream authentication: short-lived tokens for one run's events; 204 at the end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial

import httpx
import pytest
import trio
from _support.http_server import (
    Server,
    keyed_config,
    open_keyed_server,
    open_server,
    sse_events,
    standard_agents,
)

from soulacy.kernel import Kernel
from soulacy.plugins.http import run_logs
from soulacy.testing import Workspace

TOKEN_HEADER = "soulacy-events-token"


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    async with open_keyed_server(workspace, make_kernel, "  stream_token_ttl: 2\n") as running:
        yield running


def _anonymous(server: Server) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url + "/api/v1", timeout=30)


async def test_a_token_from_the_chat_answer_reads_that_runs_events_without_a_header(
    server: Server,
) -> None:
    async with server.client("alice") as alice:
        done = await alice.post("/chat/stream", json={"agent_id": "tooly", "text": "go"})
    token = done.headers[TOKEN_HEADER]
    run_id = sse_events(done.text)[0]["data"]["run_id"]
    async with _anonymous(server) as browser:
        replay = await browser.get(f"/runs/{run_id}/events", params={"token": token})
        assert replay.status_code == 200, replay.text
        assert sse_events(replay.text) == sse_events(done.text)
        # The token is for this run's events only: not another route, not another run.
        assert (await browser.get(f"/runs/{run_id}", params={"token": token})).status_code == 401
        other = await browser.get("/runs/other-run/events", params={"token": token})
        assert other.status_code == 401
        forged = await browser.get(f"/runs/{run_id}/events", params={"token": token[:-2] + "xx"})
        assert forged.status_code == 401
        assert token not in forged.text


async def test_the_token_route_issues_tokens_to_the_runs_owner_only(server: Server) -> None:
    async with server.client("alice") as alice, server.client("bob") as bob:
        run_id = (await alice.post("/chat", json={"agent_id": "echo", "text": "x"})).json()[
            "run_id"
        ]
        issued = await alice.post(f"/runs/{run_id}/token")
        assert issued.status_code == 200, issued.text
        body = issued.json()
        assert body["run_id"] == run_id
        assert body["expires_in"] == 2
        assert issued.headers["cache-control"] == "no-store"
        assert (await bob.post(f"/runs/{run_id}/token")).status_code == 404
        assert (await bob.post("/runs/nothing-here/token")).status_code == 404
    async with _anonymous(server) as browser:
        # A token cannot mint tokens: the route wants the bearer key itself.
        minted = await browser.post(f"/runs/{run_id}/token", params={"token": body["token"]})
        assert minted.status_code == 401
        events = await browser.get(f"/runs/{run_id}/events", params={"token": body["token"]})
        assert events.status_code == 200
        assert sse_events(events.text)[-1]["event"] == "result"


async def test_a_token_expires(server: Server) -> None:
    async with server.client("alice") as alice:
        run_id = (await alice.post("/chat", json={"agent_id": "echo", "text": "x"})).json()[
            "run_id"
        ]
        token = (await alice.post(f"/runs/{run_id}/token")).json()["token"]
    await trio.sleep(3.1)
    async with _anonymous(server) as browser:
        response = await browser.get(f"/runs/{run_id}/events", params={"token": token})
    assert response.status_code == 401
    assert "expired" in response.json()["error"]


async def test_a_finished_run_asked_past_its_end_answers_204(server: Server) -> None:
    async with server.client("alice") as alice, server.client("bob") as bob:
        done = await alice.post("/chat/stream", json={"agent_id": "tooly", "text": "go"})
        events = sse_events(done.text)
        run_id, last = events[0]["data"]["run_id"], events[-1]["id"]
        for past in (last, last + 5):
            response = await alice.get(
                f"/runs/{run_id}/events", headers={"Last-Event-ID": str(past)}
            )
            assert response.status_code == 204, response.text
            assert response.content == b""
        # Another principal learns nothing, not even that the run ended.
        foreign = await bob.get(f"/runs/{run_id}/events", headers={"Last-Event-ID": str(last)})
        assert foreign.status_code == 404
        # After a restart (the process's log gone), the store's copy replays the same events,
        # then 204 past their end; another principal still learns nothing.
        # A stopping server writes its runs' last events first (here within 20 ms).
        assert await server.kernel.store().wait_run_events(run_id, last - 1, 10)
        run_logs(server.kernel)._logs.pop(run_id)
        replay = sse_events((await alice.get(f"/runs/{run_id}/events")).text)
        assert [(e["id"], e["event"]) for e in replay] == [(e["id"], e["event"]) for e in events]
        again = await alice.get(
            f"/runs/{run_id}/events", headers={"Last-Event-ID": str(replay[-1]["id"])}
        )
        assert again.status_code == 204
        foreign = await bob.get(f"/runs/{run_id}/events")
        assert foreign.status_code == 404


async def test_a_stream_past_its_http_deadline_ends_with_run_error_not_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    # EventSource fires an "error" event of its own on every lost connection: a server event
    # of that name would be taken for one. The deadline's event is "run_error".
    timeouts = "{tool: 1s, llm: 2s, step: 2s, run: 2s, http: 3s}"
    workspace.write_config(keyed_config(f"runtime:\n  timeouts: {timeouts}\n"))
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        trio.open_nursery() as nursery,  # the first run holds the conversation meanwhile
    ):
        nursery.start_soon(
            partial(alice.post, "/chat", json={"agent_id": "slow", "text": "1", "session_id": "q"})
        )
        await trio.sleep(0.3)
        queued = await alice.post(
            "/chat/stream", json={"agent_id": "slow", "text": "2", "session_id": "q"}
        )
    names = [e["event"] for e in sse_events(queued.text)]
    assert names[-1] == "run_error", names
    assert "error" not in names


async def test_a_token_is_good_on_every_process_on_the_store_and_after_a_restart(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    # Two servers on one store, as two processes behind a load balancer: a browser's
    # EventSource reconnects to whichever it reaches, also after a restart. The secret is the
    # store's (random), never derived from the keys.
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with open_server(make_kernel) as one, open_server(make_kernel) as two:
        async with one.client("alice") as alice:
            done = await alice.post("/chat/stream", json={"agent_id": "tooly", "text": "go"})
        token = done.headers[TOKEN_HEADER]
        run_id = sse_events(done.text)[0]["data"]["run_id"]
        async with _anonymous(two) as browser:
            elsewhere = await browser.get(f"/runs/{run_id}/events", params={"token": token})
            assert elsewhere.status_code == 200, elsewhere.text
            assert [e["id"] for e in sse_events(elsewhere.text)] == [
                e["id"] for e in sse_events(done.text)
            ]
        async with two.client("bob") as bob:  # bob's key gets bob no token for alice's run
            assert (await bob.post(f"/runs/{run_id}/token")).status_code == 404
    async with open_server(make_kernel) as restarted, _anonymous(restarted) as browser:
        again = await browser.get(f"/runs/{run_id}/events", params={"token": token})
        assert again.status_code == 200, again.text
    workspace.write_config(keyed_config().replace("alice: key-alice, ", ""))
    async with open_server(make_kernel) as without, _anonymous(without) as browser:
        refused = await browser.get(f"/runs/{run_id}/events", params={"token": token})
        assert refused.status_code == 401  # alice's key is gone: her tokens go with it
