"""A dropped stream resumes with Last-Event-ID: every event once, then the result (real HTTP).

The drops are real disconnections: a transport wrapper closes the connection after a number
of events (half-way through the next one), and the server sees the client leave.
"""

from __future__ import annotations

import httpx
import pytest

from soulacy.sdk import SoulacyError, StreamEvent
from soulacy.sdk._sse import SseDecoder

from sdk_support import (
    STEPS_REPLY,
    AsyncDropTransport,
    DropTransport,
    LiveServer,
    in_thread,
    requested,
)

NAMES = ["run", "run.limits"] + ["tool.call", "tool.result"] * 2 + ["delta"] * 3 + ["result"]


def check_complete(events: list[StreamEvent], replay: list[StreamEvent]) -> None:
    """Every event once, in order, ending with the result, as a full replay has them."""
    assert [e.id for e in events] == list(range(1, len(NAMES) + 1))
    assert [e.event for e in events] == NAMES
    assert events[-1].response().reply == STEPS_REPLY
    assert events == replay


async def test_a_dropped_stream_reconnects_after_the_last_event(server: LiveServer) -> None:
    transport = DropTransport(2, 3)  # the POST drops after 2 events, the first resume after 3

    def call() -> tuple[list[StreamEvent], list[StreamEvent], int, str | None]:
        with server.client(transport=transport) as client:
            with client.stream("steps", "go") as stream:
                events = list(stream)
            replay = list(client.events(events[0].data["run_id"]))
            return events, replay, stream.reconnects, stream.run_id

    events, replay, reconnects, run_id = await in_thread(call)
    check_complete(events, replay)
    assert reconnects == 2
    path = f"/api/v1/runs/{run_id}/events"
    assert requested(transport) == [
        ("POST", "/api/v1/chat/stream", None),
        ("GET", path, "2"),
        ("GET", path, "5"),
        ("GET", path, None),  # the full replay
    ]


async def test_the_async_client_resumes_too(server: LiveServer) -> None:
    transport = AsyncDropTransport(1, 1, 4)
    async with server.async_client(transport=transport) as client:
        stream = client.stream("steps", "go")
        events = [event async for event in stream]
        replay = [event async for event in client.events(events[0].data["run_id"])]
    check_complete(events, replay)
    assert stream.reconnects == 3
    lasts = [last for _, _, last in requested(transport)]
    assert lasts == [None, "1", "2", "6", None]


async def test_a_resumed_replay_of_a_finished_run_gets_the_rest(server: LiveServer) -> None:
    transport = DropTransport(4)

    def call() -> tuple[list[StreamEvent], list[StreamEvent]]:
        with server.client(transport=transport) as client:
            run_id = client.chat_response("steps", "go").run_id  # finished
            events = list(client.events(run_id, last_event_id=3))  # dropped after 4 more
            return events, list(client.events(run_id))

    events, replay = await in_thread(call)
    assert events == replay[3:]
    assert [last for _, _, last in requested(transport)][1:] == ["3", "7", None]


async def test_events_after_a_raw_stream_closed_early_deliver_the_rest_once(
    server: LiveServer,
) -> None:
    """Read three events with plain httpx, hang up, then follow the run with the SDK."""
    seen: list[StreamEvent] = []
    decoder = SseDecoder()
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=120) as raw,
        raw.stream(
            "POST",
            "/api/v1/chat/stream",
            json={"agent_id": "steps", "text": "go"},
            headers={"authorization": "Bearer key-a"},
        ) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            event = decoder.feed(line)
            if event is not None:
                seen.append(event)
            if len(seen) == 3:
                break  # leaving the block closes the connection
    run_id = seen[0].data["run_id"]
    async with server.async_client() as client:
        rest = [event async for event in client.events(run_id, last_event_id=seen[-1].id)]
        replay = [event async for event in client.events(run_id)]
    check_complete(seen + rest, replay)


async def test_a_stream_dropped_before_the_run_id_cannot_be_resumed(server: LiveServer) -> None:
    transport = DropTransport(0)

    def call() -> SoulacyError:
        with server.client(transport=transport) as client, pytest.raises(SoulacyError) as caught:
            list(client.stream("steps", "go"))
        return caught.value

    error = await in_thread(call)
    assert error.status is None
    assert "cannot be resumed" in str(error)
    assert str(error).startswith("POST /api/v1/chat/stream: the connection dropped")


async def test_a_known_run_id_makes_even_an_early_drop_resumable(server: LiveServer) -> None:
    transport = DropTransport(0)

    def call() -> list[StreamEvent]:
        with server.client(transport=transport) as client:
            return list(client.stream("steps", "go", run_id="named-run"))

    events = await in_thread(call)
    assert [e.event for e in events] == NAMES
    assert requested(transport)[1] == ("GET", "/api/v1/runs/named-run/events", None)


async def test_reconnections_without_progress_give_up(server: LiveServer) -> None:
    transport = DropTransport(2, 0, 0, 0)

    def call() -> SoulacyError:
        client = server.client(transport=transport, max_reconnects=2)
        with client, pytest.raises(SoulacyError) as caught:
            list(client.stream("steps", "go"))
        return caught.value

    error = await in_thread(call)
    assert "gave up after 2 reconnections" in str(error)
    assert error.status is None
    assert len(transport.requests) == 4  # the POST, a resume with progress... none: 1 + 3
