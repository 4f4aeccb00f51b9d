"""A run's SSE log holds that run alone (found by a security review): a principal who chose a
run id first — here the id a workflow step of another principal's run will get — never reads
that later run's events through its own, finished log."""

from __future__ import annotations

from collections.abc import Callable

import trio
from _support.http_server import keyed_config, open_server, sse_events, standard_agents

from soulacy.kernel import Event, Kernel
from soulacy.plugins.http._runlog import RunLogs
from soulacy.testing import Workspace


async def test_another_principals_later_run_never_lands_in_a_finished_log(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    workspace.write_agent(
        "wf",
        {
            "llm": {"provider": "scripted", "model": "agents/echo/script.yaml"},
            "workflow": {"steps": [{"id": "s1", "agent": "echo", "input": "{input}"}]},
        },
    )
    async with (
        open_server(make_kernel) as server,
        server.client("bob") as bob,
        server.client("alice") as alice,
    ):

        async def hold() -> None:
            await bob.post(
                "/chat",
                json={
                    "agent_id": "slow",
                    "text": "hold",
                    "run_id": "bob-hold",
                    "session_id": "bq",
                },
            )

        async def squat() -> None:
            await bob.post(
                "/chat",
                json={
                    "agent_id": "slow",
                    "text": "squat",
                    "run_id": "invoice-7:s1",
                    "session_id": "bq",
                },
            )

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.sleep(0.3)
            nursery.start_soon(squat)  # queued behind bob-hold: nothing of it is stored
            await trio.sleep(0.3)
            await bob.post("/chat/cancel", json={"run_id": "invoice-7:s1"})
            await bob.post("/chat/cancel", json={"run_id": "bob-hold"})
        own = sse_events((await bob.get("/runs/invoice-7:s1/events")).text)
        assert own[-1]["event"] == "result"
        last = own[-1]["id"]
        answer = await alice.post(
            "/chat",
            json={
                "agent_id": "wf",
                "text": "alice's private invoice",
                "run_id": "invoice-7",
                "session_id": "alice-private-session",
            },
        )
        assert answer.status_code == 200
        later = await bob.get("/runs/invoice-7:s1/events", headers={"last-event-id": str(last)})
        assert later.status_code in (204, 404), later.text
        assert "alice-private-session" not in later.text
        assert "hello there" not in later.text


def _event(type_: str, run_id: str, **data: object) -> Event:
    return Event(type_, dict(data), run_id=run_id)


def test_a_log_is_replaced_when_another_run_of_that_id_starts() -> None:
    logs = RunLogs()
    bobs = logs.open("x", "bob")
    bobs.append("result", {"status": "cancelled"})
    logs.observe(_event("run.started", "x", principal="alice", session_id="private"))
    logs.observe(_event("run.completed", "x", reply="secret", session_id="private"))
    assert [e.name for e in bobs.events] == []
    assert bobs.result is not None
    assert bobs.result.data == {"status": "cancelled"}, "bob's finished log is untouched"
    alices = logs.get("x")
    assert alices is not None
    assert alices is not bobs
    assert alices.principal == "alice"
    assert [e.name for e in alices.after(0)[1]] == ["run", "result"]


def test_events_after_a_result_are_never_skipped() -> None:
    logs = RunLogs()
    log = logs.open("y", None)
    for n in range(5):
        log.append("delta", {"n": n})
    assert [e.data["n"] for e in log.after(2)[1]] == [2, 3, 4]
