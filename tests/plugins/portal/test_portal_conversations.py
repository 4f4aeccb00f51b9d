"""Conversations on the server (issue 39): each principal's list with search, rename and delete
(``/api/v1/conversations``), and today's spend against the budgets (``/api/v1/costs/today``),
over a real server on 127.0.0.1 with two principals: bob never sees, renames or deletes
alice's, even under the same session id. On SQLite and on the memory store (nothing of it is a
store's own: runs, history and plugin state only)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import trio
import trio.lowlevel
from _support.http_server import open_server
from portal_support import advanced_config

from soulacy.kernel import Kernel
from soulacy.plugins.portal._conversations import state_key
from soulacy.testing import Workspace

STORES = pytest.mark.parametrize("store", [[], ["no:sqlite_store"]], ids=["sqlite", "memory"])


async def chat(client: object, agent: str, text: str, session: str, run: str) -> None:
    answer = await client.post(  # type: ignore[attr-defined]
        "/chat", json={"agent_id": agent, "text": text, "session_id": session, "run_id": run}
    )
    assert answer.status_code == 200, answer.text


@STORES
async def test_each_principal_lists_its_own_conversations_titled_by_the_first_message(
    keyed: Workspace, make_kernel: Callable[..., Kernel], store: list[str]
) -> None:
    async with (
        open_server(make_kernel, plugins=store) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await chat(alice, "echo", "plan the garden", "s-garden", "a-1")
        await chat(alice, "echo", "and the shed", "s-garden", "a-2")
        await chat(alice, "echo", "taxes for 2026", "s-taxes", "a-3")
        await chat(bob, "echo", "bob's own words", "s-garden", "b-1")  # the same session id
        mine = (await alice.get("/conversations")).json()
        theirs = (await bob.get("/conversations")).json()
        found = (await alice.get("/conversations?q=GARDEN")).json()["conversations"]
        by_agent = (await alice.get("/conversations?q=echo taxes")).json()["conversations"]
        one = await alice.get("/conversations/s-garden")
        not_bobs = await bob.get("/conversations/s-taxes")
        assert (await alice.get("/conversations?limit=0")).status_code == 422
    listed = mine["conversations"]
    assert [c["session_id"] for c in listed] == ["s-taxes", "s-garden"]  # newest activity first
    garden = listed[1]
    assert garden["title"] == "plan the garden"
    assert (garden["agent_id"], garden["agents"], garden["runs"]) == ("echo", ["echo"], 2)
    assert (garden["status"], garden["running"], garden["last_run_id"]) == (
        "completed",
        False,
        "a-2",
    )
    assert garden["last_activity"] >= garden["started_at"]
    assert [c["title"] for c in theirs["conversations"]] == ["bob's own words"]
    assert [c["session_id"] for c in found] == ["s-garden"]
    assert [c["session_id"] for c in by_agent] == ["s-taxes"]
    assert one.status_code == 200
    assert one.json()["title"] == "plan the garden"
    assert not_bobs.status_code == 404


@STORES
async def test_a_rename_is_the_principals_own_and_null_gives_the_first_message_back(
    keyed: Workspace, make_kernel: Callable[..., Kernel], store: list[str]
) -> None:
    async with (
        open_server(make_kernel, plugins=store) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await chat(alice, "echo", "plan the garden", "s-1", "a-1")
        await chat(bob, "echo", "bob's garden", "s-1", "b-1")
        await chat(alice, "echo", "alone", "s-2", "a-2")
        renamed = await alice.patch("/conversations/s-1", json={"title": "  Garden   plans "})
        assert renamed.status_code == 200, renamed.text
        assert (renamed.json()["title"], renamed.json()["renamed"]) == ("Garden plans", True)
        # bob's conversation under the same session id keeps its title; alice's other one
        # is not his to rename
        assert (await bob.get("/conversations/s-1")).json()["title"] == "bob's garden"
        assert (await bob.patch("/conversations/s-2", json={"title": "mine"})).status_code == 404
        assert (await alice.get("/conversations/s-2")).json()["title"] == "alone"
        bad = await alice.patch("/conversations/s-1", json={"title": "", "x": 1})
        assert bad.status_code == 422
        assert set(bad.json()["fields"]) == {"title", "x"}
        assert (await alice.patch("/conversations/s-1", json={})).status_code == 422
        found = (await alice.get("/conversations?q=plans")).json()["conversations"]
        assert [c["session_id"] for c in found] == ["s-1"]
        again = await alice.patch("/conversations/s-1", json={"title": None})
        assert (again.json()["title"], again.json()["renamed"]) == ("plan the garden", False)
        await alice.patch("/conversations/s-1", json={"title": "Again"})
        blank = await alice.patch("/conversations/s-1", json={"title": "  "})
        assert (blank.json()["title"], blank.json()["renamed"]) == ("plan the garden", False)
        assert (await alice.patch("/conversations/s-1", json={"title": 1})).status_code == 422
        too_long = await alice.patch("/conversations/s-1", json={"title": "x" * 201})
        assert too_long.status_code == 422
        # kept in the store with the conversation's newest run (retention deletes it with it)
        await alice.patch("/conversations/s-1", json={"title": "Kept"})
        kept = await server.kernel.store().load_state(state_key("alice", "s-1"))
    assert kept is not None
    assert kept["title"] == "Kept"


@STORES
async def test_a_delete_is_the_principals_own_and_refused_while_a_run_goes_on(
    keyed: Workspace, make_kernel: Callable[..., Kernel], store: list[str]
) -> None:
    async with (
        open_server(make_kernel, plugins=store) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await chat(alice, "echo", "mine", "s-1", "a-1")
        await chat(bob, "echo", "his", "s-1", "b-1")
        await chat(alice, "echo", "other", "s-2", "a-2")
        assert (await bob.delete("/conversations/s-2")).status_code == 404
        assert (await alice.get("/conversations/s-2")).status_code == 200
        deleted = await alice.delete("/conversations/s-1")
        assert deleted.status_code == 200, deleted.text
        assert deleted.json() == {"session_id": "s-1", "deleted": True}
        listed = (await alice.get("/conversations")).json()["conversations"]
        assert [c["session_id"] for c in listed] == ["s-2"]
        assert (await alice.get("/conversations/s-1")).status_code == 404
        assert (await alice.delete("/conversations/s-1")).status_code == 404
        assert (await alice.patch("/conversations/s-1", json={"title": "x"})).status_code == 404
        # bob's conversation with the same session id is untouched
        his = (await bob.get("/conversations")).json()["conversations"]
        assert [c["session_id"] for c in his] == ["s-1"]

        # A conversation whose run goes on ("slow" answers after 30 s) is refused: 409.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                functools.partial(alice.post, "/chat", json={"agent_id": "slow", "text": "wait"})
            )
            nursery.cancel_scope.deadline = trio.current_time() + 60
            running = None
            while running is None:
                await trio.lowlevel.checkpoint()  # until the server lists it
                listed = (await alice.get("/conversations")).json()["conversations"]
                running = next((c for c in listed if c["running"]), None)
            refused = await alice.delete(f"/conversations/{running['session_id']}")
            assert refused.status_code == 409
            assert "cancel it" in refused.json()["error"]
            assert (await bob.delete(f"/conversations/{running['session_id']}")).status_code == 404
            cancelled = await alice.post("/chat/cancel", json={"run_id": running["last_run_id"]})
            assert cancelled.status_code == 200
            nursery.cancel_scope.cancel()


@STORES
async def test_today_shows_the_daily_budget_everyones_spend_and_each_model_calls_price(
    keyed: Workspace, make_kernel: Callable[..., Kernel], store: list[str]
) -> None:
    keyed.write_config(
        advanced_config().replace(
            "    - {provider: local,",
            '    - {provider: scripted, model: "*", input_per_mtok: 2.0, output_per_mtok: 0}\n'
            "    - {provider: local,",
        )
    )
    keyed.scripted_agent(
        "priced", [{"text": "ok", "usage": {"input": 1_000_000, "output": 0}}], repeat=True
    )
    async with (
        open_server(make_kernel, plugins=store) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await chat(alice, "priced", "one", "s-1", "a-1")
        await chat(alice, "priced", "two", "s-1", "a-2")
        await chat(bob, "priced", "three", "s-2", "b-1")
        mine = (await alice.get("/costs/today")).json()
        theirs = (await bob.get("/costs/today")).json()
        timeline = (await alice.get("/runs/a-1/timeline")).json()
    # each model call in the run's timeline, with its price, model and provider
    [call] = [e for e in timeline["entries"] if e["kind"] == "model_reply"]
    assert (call["cost_usd"], call["provider"], call["input_tokens"]) == (2.0, "scripted", 10**6)
    # each run: a million input tokens at $2 a million; the advanced config's
    # max_daily_cost_usd is 40 and its hourly token quota is set
    budget = mine["daily_budget"]
    assert (budget["limit_usd"], budget["source"]) == (40.0, "costs.max_daily_cost_usd")
    assert budget["spent_usd"] == theirs["daily_budget"]["spent_usd"] == 6.0  # everyone's
    assert (mine["yours"]["cost_usd"], theirs["yours"]["cost_usd"]) == (4.0, 2.0)
    assert mine["token_quotas"]["tokens_per_hour"] == {"limit": 5_000_000, "used": 3_000_000}
    assert (mine["yours"]["principal"], mine["yours"]["runs"]) == ("alice", 2)
    assert mine["yours"]["tokens"] == 2_000_000
    assert (theirs["yours"]["runs"], theirs["yours"]["tokens"]) == (1, 1_000_000)
    assert len(mine["day"]) == 10
