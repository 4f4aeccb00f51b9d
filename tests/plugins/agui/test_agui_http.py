"""A run as AG-UI events at ``/api/v1/agui/{agent_id}``: a real server on 127.0.0.1, the test
principals' keys, and every event checked with the ``ag-ui-protocol`` package's types."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from _support.http_server import keyed_config, open_server
from ag_ui.core import PROTOCOL_VERSION
from agui_support import (
    EventReader,
    agents,
    check_lifecycle,
    parse_sse,
    post_run,
    run_input,
    text_of,
)

from soulacy.kernel import Event, Kernel
from soulacy.testing import Workspace

OPENAPI = Path(__file__).parents[3] / "plugins" / "http" / "openapi.json"


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    return workspace


async def test_a_run_is_answered_as_agui_events_each_valid_by_the_sdk(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        body = run_input("thread-1", "run-1", "hi", state={"theme": "dark"})
        answer, events = await post_run(alice, "echo", body)
        stored = await server.kernel.store().get_run("run-1")
    assert answer.status_code == 200
    check_lifecycle(events)
    types = [e.type for e in events]
    assert types[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert types[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    started, finished = events[0].event, events[-1].event
    assert (started.thread_id, started.run_id) == ("thread-1", "run-1")
    assert (finished.thread_id, finished.run_id) == ("thread-1", "run-1")
    assert started.protocol_version == PROTOCOL_VERSION
    assert finished.outcome is None  # success
    assert text_of(events) == "hello there"
    # the client's state is kept in every snapshot, the run's progress beside it
    last_state = events[-2].event.snapshot
    assert last_state["theme"] == "dark"
    assert last_state["soulacy"]["status"] == "completed"
    # threadId is the conversation, runId the run, stored under the caller's principal
    assert stored is not None
    assert (stored.session_id, stored.agent_id, stored.principal) == ("thread-1", "echo", "alice")


async def test_a_tool_call_is_start_args_end_then_its_result_after_the_text_before_it(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, events = await post_run(alice, "tooly", run_input("t-tool", "run-tool", "look"))
    check_lifecycle(events)
    types = [e.type for e in events]
    first_text_end = types.index("TEXT_MESSAGE_END")
    call = types.index("TOOL_CALL_START")
    assert first_text_end < call
    assert types[call : call + 4] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    start, args, _, result = (e.event for e in events[call : call + 4])
    assert start.tool_call_name == "lookup"
    assert start.tool_call_id == "run-tool:call_0_0"  # the run's id first: unique in the thread
    assert start.parent_message_id == events[first_text_end].event.message_id
    assert args.delta == '{"q": "x"}'
    assert result.tool_call_id == start.tool_call_id
    assert "lookup" in result.content  # the agent has no such tool: the error says so
    assert text_of(events) == "let me lookdone"
    assert types[-1] == "RUN_FINISHED"


async def test_a_run_that_does_not_complete_ends_with_run_error_saying_why(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, events = await post_run(alice, "short", run_input("t-short", "run-short", "go"))
    check_lifecycle(events)
    error = events[-1].event
    assert events[-1].type == "RUN_ERROR"
    assert error.message.startswith("run run-short ended incomplete: ")
    assert error.code == "max_turns"


async def _until_started(events: trio.MemoryReceiveChannel[Event], run_id: str) -> None:
    """Return once ``run_id`` has begun (its ``run.started`` event)."""
    async for event in events:
        if event.type == "run.started" and event.run_id == run_id:
            return


async def test_cancel_ends_the_run_with_the_cancelled_outcome_and_a_resumed_stream_too(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    streams: dict[str, Any] = {}
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        async with trio.open_nursery() as nursery:

            async def stream() -> None:
                body = run_input("t-slow", "run-slow", "take your time")
                streams["posted"] = await post_run(alice, "slow", body)

            async def resume() -> None:
                path, after_first = "/agui/runs/run-slow/events", {"last-event-id": "1"}
                streams["resumed"] = await alice.get(path, headers=after_first)

            events = server.kernel.events.subscribe(math.inf)
            nursery.start_soon(stream)
            await _until_started(events, "run-slow")
            nursery.start_soon(resume)  # a second client, while the run goes on
            async with server.client("bob") as bob:  # not his run: not even confirmed
                refused = await bob.post("/chat/cancel", json={"run_id": "run-slow"})
            assert refused.status_code == 404
            cancelled = await alice.post("/chat/cancel", json={"run_id": "run-slow"})
            assert cancelled.json()["cancelled"] is True
        stored = await server.kernel.store().get_run("run-slow")
    _, posted = streams["posted"]
    check_lifecycle(posted)
    assert posted[-1].type == "RUN_FINISHED"
    assert posted[-1].event.outcome.type == "cancelled"  # stopped on purpose, not failed
    assert posted[-2].event.snapshot["soulacy"]["status"] == "cancelled"
    assert stored is not None
    assert stored.status == "cancelled"
    # the stream resumed after event 1 got the same events after it
    resumed = parse_sse(streams["resumed"].text)
    assert [(e.id, e.raw) for e in resumed] == [(e.id, e.raw) for e in posted[1:]]


async def test_events_arrive_as_the_run_makes_them_and_a_client_leaving_cancels_nothing(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    body = run_input("t-live", "run-live", "take your time")
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        async with (
            alice.stream("POST", "/agui/slow", json=body) as response,
            EventReader(response) as reader,
        ):
            assert response.headers["content-type"] == "text/event-stream"
            first = await reader.next(2)
            # the run sleeps in its model call: what came so far came while it runs
            running = (await alice.get("/runs/run-live")).json()["running"]
        # the client went away after two events; the run is the server's and goes on
        still = (await alice.get("/runs/run-live")).json()["running"]
        cancelled = await alice.post("/chat/cancel", json={"run_id": "run-live"})
        resumed = await alice.get("/agui/runs/run-live/events", headers={"last-event-id": "2"})
    assert [e.type for e in first] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert running is True
    assert still is True
    assert cancelled.json()["cancelled"] is True
    rest = parse_sse(resumed.text)
    check_lifecycle(first + rest)
    assert rest[-1].event.outcome.type == "cancelled"


async def test_a_run_the_server_stops_ends_interrupted_and_is_resumed_on_the_next_server(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        trio.open_nursery() as nursery,
    ):

        async def post() -> None:
            await post_run(alice, "slow", run_input("t-stop", "run-stop", "take your time"))

        events = server.kernel.events.subscribe(math.inf)
        nursery.start_soon(post)
        await _until_started(events, "run-stop")
        nursery.cancel_scope.cancel()  # the client goes away; the run goes on
    # leaving the server stops the kernel, which interrupts the run it still executes
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        # seen: RUN_STARTED, STATE_SNAPSHOT, and the STATE_DELTA of its model call
        resumed = await alice.get("/agui/runs/run-stop/events", headers={"last-event-id": "3"})
        stored = await server.kernel.store().get_run("run-stop")
    events_after = parse_sse(resumed.text)
    assert [e.type for e in events_after] == ["STATE_SNAPSHOT", "RUN_ERROR"]
    assert events_after[-1].event.code == "shutdown"  # stored so, as the HTTP API's runs are
    assert stored is not None
    assert stored.status == "interrupted"  # not finished: a retry of its id would resume it


async def test_last_event_id_replays_the_rest_and_204_once_all_was_seen(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, events = await post_run(alice, "echo", run_input("t-r", "run-r", "hi"))
        path = "/agui/runs/run-r/events"
        whole = await alice.get(path)
        rest = await alice.get(path, headers={"last-event-id": "3"})
        seen = await alice.get(path, headers={"last-event-id": str(events[-1].id)})
        bad = await alice.get(path, headers={"last-event-id": "three"})
    assert [e.raw for e in parse_sse(whole.text)] == [e.raw for e in events]
    assert [(e.id, e.raw) for e in parse_sse(rest.text)] == [(e.id, e.raw) for e in events[3:]]
    assert seen.status_code == 204
    assert bad.status_code == 400
    assert "Last-Event-ID" in bad.json()["fields"]


async def test_a_finished_run_is_replayed_from_the_store_after_a_restart(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, events = await post_run(alice, "tooly", run_input("t-s", "run-s", "look"))
    # a new kernel on the same workspace: nothing in memory, only what the store kept
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        rest = await alice.get("/agui/runs/run-s/events", headers={"last-event-id": "2"})
        his = await bob.get("/agui/runs/run-s/events")
        unknown = await alice.get("/agui/runs/nothing/events")
    assert [(e.id, e.raw) for e in parse_sse(rest.text)] == [(e.id, e.raw) for e in events[2:]]
    assert his.status_code == 404
    assert unknown.status_code == 404


async def test_bob_can_neither_resume_nor_reuse_alices_run_nor_read_her_thread(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        async with server.client("alice") as alice, server.client("bob") as bob:
            await post_run(alice, "echo", run_input("shared-thread", "alice-run", "mine"))
            resumed = await bob.get("/agui/runs/alice-run/events")
            reused, _ = await post_run(bob, "echo", run_input("t-b", "alice-run", "hers?"))
            again, _ = await post_run(alice, "echo", run_input("t-a", "alice-run", "again"))
            answer, events = await post_run(bob, "echo", run_input("shared-thread", "b-1", "his"))
        async with server.client(None) as nobody:
            keyless_post = await nobody.post("/agui/echo", json=run_input("t", "r-x", "hi"))
            keyless_get = await nobody.get("/agui/runs/alice-run/events")
        store = server.kernel.store()
        hers = await store.load_history("echo", "shared-thread", "alice")
        his = await store.load_history("echo", "shared-thread", "bob")
    assert resumed.status_code == 404
    assert reused.status_code == 404  # another principal's run id: not even confirmed
    assert again.status_code == 409  # her own: a new run needs a new runId
    assert answer.status_code == 200
    check_lifecycle(events)
    assert [m.content for m in hers if m.role == "user"] == ["mine"]
    assert [m.content for m in his if m.role == "user"] == ["his"]  # none of hers
    assert keyless_post.status_code == keyless_get.status_code == 401


def _with(body: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**body, **changes}


GOOD = run_input("t-bad", "run-bad", "hi")
BAD_INPUTS = [
    ([1, 2], "body"),
    (_with(GOOD, threadId=None), "threadId"),
    (_with(GOOD, runId="a/b"), "runId"),
    (_with(GOOD, messages=[]), "messages"),
    (_with(GOOD, messages=[{"id": "1", "role": "assistant", "content": "hi"}]), "messages.0.role"),
    (
        _with(
            GOOD,
            messages=[
                {
                    "id": "1",
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "url", "value": "u"}}],
                }
            ],
        ),
        "messages.0.content.0",
    ),
    (_with(GOOD, messages=[{"id": "1", "role": "user", "content": " "}]), "messages.0.content"),
    (_with(GOOD, state=[1]), "state"),
    (
        _with(GOOD, resume=[{"interruptId": "i", "status": "resolved"}]),
        "resume.0.payload.approved",
    ),
    (_with(GOOD, resume=[{"interruptId": "i", "status": "maybe"}]), "resume.0.status"),
    (_with(GOOD, resume=[{"status": "cancelled"}]), "resume.0.interruptId"),
    (_with(GOOD, resume={"interruptId": "i"}), "resume"),
]


@pytest.mark.parametrize(("body", "field"), BAD_INPUTS, ids=[f for _, f in BAD_INPUTS])
async def test_bad_input_is_a_422_naming_the_field_and_starts_no_run(
    served: Workspace, make_kernel: Callable[..., Kernel], body: Any, field: str
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.post("/agui/echo", json=body)
        stored = await server.kernel.store().get_run("run-bad")
    assert answer.status_code == 422
    assert field in answer.json()["fields"]
    assert stored is None


async def test_an_unknown_agent_is_a_404_and_text_parts_are_the_input(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    parts = [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]
    body = _with(GOOD, messages=[{"id": "1", "role": "user", "content": parts}])
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        unknown = await alice.post("/agui/nobody", json=GOOD)
        answer, events = await post_run(alice, "echo", body)
        history = await server.kernel.store().load_history("echo", "t-bad", "alice")
    assert unknown.status_code == 404
    assert answer.status_code == 200
    check_lifecycle(events)
    assert [m.content for m in history if m.role == "user"] == ["one\ntwo"]


def test_every_agui_route_is_in_the_openapi_document(make_kernel: Callable[..., Kernel]) -> None:
    from soulacy.plugins.agui import soulacy_http_routes

    document = json.loads(OPENAPI.read_text())
    for route in soulacy_http_routes(make_kernel()):
        path = re.sub(r"\(\?P<(\w+)>\[\^/\]\+\)", r"{\1}", route.path)
        assert route.method.lower() in document["paths"].get(path, {}), route.name
