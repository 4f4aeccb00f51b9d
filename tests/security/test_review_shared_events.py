"""Security review of step 17 (runs' events shared through the store): who owns stored rows."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import trio
from _support.http_server import keyed_config, open_server, sse_events, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


def _workflow(workspace: Workspace) -> None:
    workspace.write_agent(
        "wf",
        {
            "llm": {"provider": "scripted", "model": "agents/echo/script.yaml"},
            "workflow": {"steps": [{"id": "s1", "agent": "echo", "input": "{input}"}]},
        },
    )


async def test_review_a_refused_attempt_never_replaces_the_owners_stored_events(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Bob's finished run ``inv:s1`` is stored with its events. Alice's workflow run ``inv``
    gets the step run id ``inv:s1``: the engine refuses it (identity_mismatch, "nothing of
    this attempt is stored under another's run id"), yet its result event opens a log of its
    own, the publisher sees a new log (restart=True) and deletes bob's stored events, writing
    alice's refused result under bob's run id. Bob then gets 404 for his own run's events."""
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    _workflow(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("bob") as bob,
        server.client("alice") as alice,
    ):
        store = server.kernel.store()
        done = await bob.post(
            "/chat", json={"agent_id": "echo", "text": "hi", "run_id": "inv:s1", "session_id": "b"}
        )
        assert done.status_code == 200, done.text
        before = await bob.get("/runs/inv:s1/events")
        assert before.status_code == 200
        assert sse_events(before.text)[-1]["event"] == "result"
        stored = None
        for _ in range(50):  # the publisher writes every 20 ms
            stored = await store.run_events("inv:s1", 0)
            if stored is not None:
                break
            await trio.sleep(0.05)
        assert stored is not None
        assert stored.principal == "bob"

        wf = await alice.post(
            "/chat",
            json={"agent_id": "wf", "text": "alice private", "run_id": "inv", "session_id": "as"},
        )
        assert wf.status_code == 200, wf.text
        await trio.sleep(0.3)  # the publisher's flush
        after = await store.run_events("inv:s1", 0)
        record = await store.get_run("inv:s1")
        assert record is not None
        assert record.principal == "bob"
        # The property the security model promises: the stored copy is still bob's.
        assert after is not None
        assert after.principal == "bob", (
            f"bob's stored events of run inv:s1 were replaced by an attempt of"
            f" {after.principal!r}: {[(e.name, dict(e.data)) for e in after.events]}"
        )
        again = await bob.get("/runs/inv:s1/events")
        assert again.status_code == 200, again.text


async def test_review_stored_events_of_an_evicted_log_are_the_owners_alone(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """With ``finished_runs_kept: 0`` a finished run's events come from the store: bob gets the
    same 404 as for an id that does not exist (token of his own run included), alice her
    events."""
    workspace.write_config(keyed_config("  finished_runs_kept: 0\n"))
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("bob") as bob,
        server.client("alice") as alice,
    ):
        done = await alice.post(
            "/chat", json={"agent_id": "echo", "text": "hi", "run_id": "ev-a", "session_id": "s"}
        )
        assert done.status_code == 200, done.text
        for _ in range(50):
            if await server.kernel.store().run_events("ev-a", 0) is not None:
                break
            await trio.sleep(0.05)
        mine = await alice.get("/runs/ev-a/events")
        assert mine.status_code == 200
        names = [e["event"] for e in sse_events(mine.text)]
        assert (names[0], names[-1]) == ("run", "result"), names
        bobs_token = (
            await bob.post(
                "/chat", json={"agent_id": "echo", "text": "x", "run_id": "ev-b", "session_id": "s"}
            )
        ).headers["soulacy-events-token"]
        for headers, params in (
            ({}, {}),
            ({"last-event-id": "999999999999"}, {}),
            ({"last-event-id": "1"}, {}),
        ):
            theirs = await bob.get("/runs/ev-a/events", headers=headers, params=params)
            none = await bob.get("/runs/ev-zz/events", headers=headers, params=params)
            assert (theirs.status_code, none.status_code) == (404, 404)
            assert theirs.json()["error"].replace("ev-a", "X") == none.json()["error"].replace(
                "ev-zz", "X"
            )
        url = server.url + "/api/v1/runs/ev-a/events"
        async with httpx.AsyncClient() as anonymous:
            token = await anonymous.get(url, params={"token": bobs_token})
        assert token.status_code == 401
