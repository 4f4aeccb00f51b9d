"""A dropped stream resumes with Last-Event-ID: every event once, then the result (real HTTP).

The drops are real: a TCP proxy between client and server cuts the connection after a number
of events, half-way through the next one (see ``DropProxy``).
"""

from __future__ import annotations

import httpx
import pytest
from sdk_support import STEPS_REPLY, TIMEOUT, DropProxy, LiveServer, Requested, in_thread, record

from soulacy.sdk import SoulacyError, StreamEvent
from soulacy.sdk._sse import SseDecoder

NAMES = ["run", "run.limits"] + ["tool.call", "tool.result"] * 2 + ["delta"] * 3 + ["result"]


def check_complete(events: list[StreamEvent], replay: list[StreamEvent]) -> None:
    """Every event once, in order, ending with the result, as a full replay has them."""
    assert [e.id for e in events] == list(range(1, len(NAMES) + 1))
    assert [e.event for e in events] == NAMES
    assert events[-1].response().reply == STEPS_REPLY
    assert events == replay


async def test_a_dropped_stream_reconnects_after_the_last_event(
    server: LiveServer, proxy: DropProxy
) -> None:
    proxy.cuts = [2, 3]  # the POST drops after 2 events, the first resumption after 3 more

    def call() -> tuple[list[StreamEvent], list[StreamEvent], int, Requested]:
        with server.client(url=proxy.url) as client:
            requests = record(client)
            with client.stream("steps", "go") as stream:
                events = list(stream)
            replay = list(client.events(events[0].data["run_id"]))
            return events, replay, stream.reconnects, requests

    events, replay, reconnects, requests = await in_thread(call)
    check_complete(events, replay)
    assert reconnects == 2
    path = f"/api/v1/runs/{events[0].data['run_id']}/events"
    assert requests == [
        ("POST", "/api/v1/chat/stream", None),
        ("GET", path, "2"),
        ("GET", path, "5"),
        ("GET", path, None),  # the full replay
    ]
    assert proxy.connections == 3  # the replay reused the last one


async def test_the_async_client_resumes_too(server: LiveServer, proxy: DropProxy) -> None:
    proxy.cuts = [1, 1, 4]
    async with server.async_client(url=proxy.url) as client:
        requests = record(client)
        async with client.stream("steps", "go") as stream:
            events = [event async for event in stream]
        replay = [event async for event in client.events(events[0].data["run_id"])]
    check_complete(events, replay)
    assert stream.reconnects == 3
    assert stream.response == events[-1].response()
    assert [last for _, _, last in requests] == [None, "1", "2", "6", None]


async def test_following_a_finished_run_resumes_too(server: LiveServer, proxy: DropProxy) -> None:
    proxy.cuts = [4]  # the connection of the chat, reused by the events (after 4 of them)

    def call() -> tuple[list[StreamEvent], list[StreamEvent], Requested]:
        with server.client(url=proxy.url) as client:
            requests = record(client)
            run_id = client.chat_response("steps", "go").run_id  # finished
            events = list(client.events(run_id, last_event_id=3))
            return events, list(client.events(run_id)), requests

    events, replay, requests = await in_thread(call)
    assert events == replay[3:]
    assert [last for _, _, last in requests] == [None, "3", "7", None]


async def test_events_after_a_raw_stream_closed_early_deliver_the_rest_once(
    server: LiveServer,
) -> None:
    """Read three events with plain httpx, hang up, then follow the run with the SDK."""

    def read_three() -> list[StreamEvent]:
        seen: list[StreamEvent] = []
        decoder = SseDecoder()
        with httpx.stream(
            "POST",
            f"{server.url}/api/v1/chat/stream",
            json={"agent_id": "steps", "text": "go"},
            headers={"authorization": "Bearer key-a"},
            timeout=TIMEOUT,
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                event = decoder.feed(line)
                if event is not None:
                    seen.append(event)
                if len(seen) == 3:
                    return seen  # leaving the block closes the connection
        raise AssertionError("the stream ended early")

    seen = await in_thread(read_three)
    run_id = seen[0].data["run_id"]
    async with server.async_client() as client:
        rest = [event async for event in client.events(run_id, last_event_id=seen[-1].id)]
        replay = [event async for event in client.events(run_id)]
    check_complete(seen + rest, replay)


async def test_a_stream_dropped_before_the_run_id_cannot_be_resumed(
    server: LiveServer, proxy: DropProxy
) -> None:
    proxy.cuts = [0]  # right after the response's head

    def call() -> SoulacyError:
        with server.client(url=proxy.url) as client, pytest.raises(SoulacyError) as caught:
            list(client.stream("steps", "go"))
        return caught.value

    error = await in_thread(call)
    assert error.status is None
    assert str(error).startswith("POST /api/v1/chat/stream: the connection dropped")
    assert "cannot be resumed" in str(error)


async def test_a_known_run_id_makes_even_an_early_drop_resumable(
    server: LiveServer, proxy: DropProxy
) -> None:
    proxy.cuts = [0]
    async with server.async_client(url=proxy.url) as client:
        requests = record(client)
        events = [event async for event in client.stream("steps", "go", run_id="named-run")]
    assert [e.event for e in events] == NAMES
    assert requests[1] == ("GET", "/api/v1/runs/named-run/events", None)


async def test_reconnections_without_progress_give_up(server: LiveServer, proxy: DropProxy) -> None:
    proxy.cuts = [2, 0, 0, 0]

    def call() -> SoulacyError:
        client = server.client(url=proxy.url, max_reconnects=2)
        with client, pytest.raises(SoulacyError) as caught:
            list(client.stream("steps", "go"))
        return caught.value

    error = await in_thread(call)
    assert "gave up after 2 reconnections" in str(error)
    assert str(error).startswith("GET /api/v1/runs/")
    assert error.status is None
    assert proxy.connections == 3  # the POST, then two reconnections without a new event
