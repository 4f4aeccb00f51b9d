"""A stored run id names one request, over HTTP as in the engine (issue 42, observation 5):
another request with it is refused before anything of it runs or is stored — ``409`` to the
run's own principal (as for a live run, ``RunIdInUse``), ``404`` to another (as for an unknown
id) — and the stored run, its history and its events stay whole. The same request again is
the run's next attempt, as a crashed or interrupted run resumes."""

from __future__ import annotations

from collections.abc import Callable

from _support.http_server import open_keyed_server, sse_events

from soulacy.kernel import Event, Kernel
from soulacy.plugins.http._runlog import RunLog, RunLogs, SseEvent
from soulacy.testing import Workspace


async def test_alices_run_id_with_another_session_is_409_and_bobs_is_404_nothing_stored(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_keyed_server(workspace, make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        body = {"agent_id": "echo", "text": "alice's secret", "run_id": "R", "session_id": "s1"}
        first = await alice.post("/chat", json=body)
        assert (first.status_code, first.json()["status"]) == (200, "completed")
        before = sse_events((await alice.get("/runs/R/events")).text)

        for changed in ({"session_id": "s2"}, {"agent_id": "tooly"}, {"user_id": "u2"}):
            for route in ("/chat", "/chat/stream"):
                other = await alice.post(route, json=body | changed | {"text": "other"})
                assert other.status_code == 409, (route, changed, other.text)
                assert "secret" not in other.text
        theirs = await bob.post("/chat", json=body | {"text": "bob's"})
        assert theirs.status_code == 404, theirs.text
        theirs = await bob.post("/chat/stream", json=body | {"session_id": "s-bob"})
        assert theirs.status_code == 404, theirs.text

        run = (await alice.get("/runs/R")).json()
        assert (run["status"], run["session_id"], run.get("attempt", 1)) == ("completed", "s1", 1)
        assert (await alice.get("/history/s2")).status_code == 404
        assert (await bob.get("/history/s-bob")).status_code == 404
        history = (await alice.get("/history/s1")).json()["entries"]
        assert [e["content"] for e in history] == ["alice's secret", "hello there"]
        after = sse_events((await alice.get("/runs/R/events")).text)
        assert after == before  # no refused request's events in the run's log
        store = server.kernel.store()
        assert [r.run_id for r in await store.list_runs(principal="bob")] == []

        again = await alice.post("/chat", json=body)  # the same request: its next attempt
        assert again.status_code == 200, again.text
        assert (again.json()["status"], again.json()["metadata"]["attempt"]) == ("completed", 2)


def test_a_run_refused_as_another_requests_is_not_shared_and_leaves_no_log() -> None:
    """In a race with another process the refusal comes at the run's first turn, after its
    ``run`` event: its log stops being shared through the store before its ``result`` (the
    store's copy of that id is the owning run's), and the id's later lookups read the store."""
    shared: list[tuple[str, str]] = []
    logs = RunLogs()

    def publish(log: RunLog, event: SseEvent) -> None:  # as the store's Publisher.add
        if not log.unshared:
            shared.append((log.run_id, event.name))

    logs.publish = publish
    mine = logs.open("x", "bob")
    logs.observe(Event("run.started", {"principal": "bob", "session_id": "s"}, run_id="x"))
    logs.observe(
        Event(
            "run.completed",
            {"status": "failed", "incomplete_reason": "identity_mismatch", "reply": ""},
            run_id="x",
        )
    )
    assert mine.result is not None  # its own streams still end with its result
    assert shared == [("x", "run")]
    assert logs.get("x") is None
