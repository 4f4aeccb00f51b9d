"""``POST /api/v1/runs/{run_id}/continue`` (and ``/continue/stream``): an incomplete run goes on
in place over HTTP — its owner's, never another principal's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from _support.http_server import keyed_config, open_server, sse_events

from soulacy.kernel import Kernel, Tool
from soulacy.testing import Workspace, throwaway_plugin

STEPS: list[dict[str, Any]] = [
    {"tool": "count", "arguments": {"n": 1}, "id": "c1"},
    {"tool": "count", "arguments": {"n": 2}, "id": "c2"},
    {"text": "counted"},
]


def counting(counted: Counter[int]) -> Any:
    def count(n: int) -> str:
        """Count (each execution is counted)."""
        counted[n] += 1
        return f"counted {n}"

    tools = [Tool.from_function(count)]
    return throwaway_plugin("counting", soulacy_tools=lambda: tools)


def agent(workspace: Workspace) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("a", STEPS, tools=["count"], max_turns=1)
    script = workspace.path / "agents" / "a" / "script.yaml"
    script.write_text(script.read_text() + "start: conversation\n")


async def test_the_owner_continues_an_incomplete_run_and_nobody_else_can(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    counted: Counter[int] = Counter()
    served = open_server(make_kernel, extra_plugins=[counting(counted)])
    async with served as server, server.client("alice") as alice, server.client("bob") as bob:
        first = await alice.post("/chat", json={"agent_id": "a", "text": "go", "run_id": "R"})
        assert first.status_code == 200
        assert first.json()["metadata"]["incomplete_reason"] == "max_turns"

        for path in ("/runs/R/continue", "/runs/R/continue/stream"):  # bob: no such run
            refused = await bob.post(path, json={"overrides": {"max_turns": 5}})
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"] == "no run 'R'"
        assert counted == Counter({1: 1})

        went_on = await alice.post("/runs/R/continue", json={"overrides": {"max_turns": 5}})
        assert went_on.status_code == 200, went_on.text
        body = went_on.json()
        assert (body["run_id"], body["status"], body["reply"]) == ("R", "completed", "counted")
        assert body["metadata"]["attempt"] == 2
        assert counted == Counter({1: 1, 2: 1})

        again = await alice.post("/runs/R/continue", json={})
        assert again.status_code == 409
        assert "run 'R' is completed" in again.json()["error"]


async def test_a_continued_run_streams_to_its_result(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    counted: Counter[int] = Counter()
    served = open_server(make_kernel, extra_plugins=[counting(counted)])
    async with served as server, server.client("alice") as alice:
        await alice.post("/chat", json={"agent_id": "a", "text": "go", "run_id": "S"})
        streamed = await alice.post(
            "/runs/S/continue/stream",
            json={"text": "please finish", "overrides": {"max_turns": 5}},
        )
        assert streamed.status_code == 200
        events = sse_events(streamed.text)
        limits = next(e for e in events if e["event"] == "run.limits")
        assert limits["data"]["max_turns"] == {
            "value": 5,
            "unlimited": False,
            "source": "request",
        }
        result = events[-1]
        assert result["event"] == "result"
        assert (result["data"]["status"], result["data"]["reply"]) == ("completed", "counted")
        history = (await alice.get("/history/" + result["data"]["session_id"])).json()
        users = [e["content"] for e in history["entries"] if e["role"] == "user"]
        assert users == ["go", "please finish"]


async def test_bad_continue_bodies_name_the_field(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    served = open_server(make_kernel, extra_plugins=[counting(Counter())])
    async with served as server, server.client("alice") as alice:
        await alice.post("/chat", json={"agent_id": "a", "text": "go", "run_id": "T"})
        wrong = await alice.post("/runs/T/continue", json={"overrides": {"max_turns": "x"}})
        assert wrong.status_code == 422
        assert "max_turns" in wrong.text
        unknown = await alice.post("/runs/T/continue", json={"txt": "typo"})
        assert unknown.status_code == 422
        assert "txt" in unknown.text


async def test_a_run_that_is_not_incomplete_is_409_on_both_routes(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    served = open_server(make_kernel, extra_plugins=[counting(Counter())])
    async with served as server, server.client("alice") as alice:
        await alice.post("/chat", json={"agent_id": "a", "text": "go", "run_id": "U"})
        done = await alice.post("/runs/U/continue", json={"overrides": {"max_turns": 5}})
        assert done.json()["status"] == "completed"
        for path in ("/runs/U/continue", "/runs/U/continue/stream"):
            again = await alice.post(path, json={})
            assert again.status_code == 409, (path, again.text)
            assert "run 'U' is completed" in again.json()["error"]
        bare = await alice.post("/runs/U/continue")  # no JSON body: told, never a 500
        assert bare.status_code in (400, 415), bare.text
        stored = await server.kernel.store().get_run("U")
        assert stored is not None
        assert (stored.principal, stored.attempt) == ("alice", 2)  # still alice's, once more


async def test_a_client_that_saw_the_first_attempt_gets_the_whole_next_one(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Event ids go on across a run's attempts: a client that followed attempt 1 to its end and
    reconnects with its last id gets attempt 2 from its first event to its ``result`` (ids
    that began at 1 again hid every event of attempt 2 up to that id, its result included)."""
    agent(workspace)
    served = open_server(make_kernel, extra_plugins=[counting(Counter())])
    async with served as server, server.client("alice") as alice:
        first = await alice.post(
            "/chat/stream", json={"agent_id": "a", "text": "go", "run_id": "T"}
        )
        seen = sse_events(first.text)
        assert seen[-1]["data"]["metadata"]["incomplete_reason"] == "max_turns"
        went_on = await alice.post("/runs/T/continue/stream", json={"overrides": {"max_turns": 5}})
        second = sse_events(went_on.text)
        assert second[-1]["data"]["status"] == "completed"
        assert len(second) < len(seen) + 5  # short enough that restarted ids hid its end
        ids = [e["id"] for e in seen + second]
        assert ids == sorted(set(ids)), "ids grow across the attempts"

        last_seen = str(seen[-1]["id"])
        again = await alice.get("/runs/T/events", headers={"Last-Event-ID": last_seen})
        rest = sse_events(again.text)
        assert [e["id"] for e in rest] == [e["id"] for e in second]
        assert rest[-1]["event"] == "result"
        assert (rest[-1]["data"]["status"], rest[-1]["data"]["metadata"]["attempt"]) == (
            "completed",
            2,
        )
