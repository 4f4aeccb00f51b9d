"""The SDK's parts without a server: SSE parsing, resumption rules, answers and errors."""

from __future__ import annotations

import ast
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from soulacy.sdk import AsyncClient, ChatResponse, Client, HistoryEntry, SoulacyError, StreamEvent
from soulacy.sdk._calls import segment
from soulacy.sdk._resume import retry_after
from soulacy.sdk._sse import SseDecoder

RESULT = {
    "reply": "done",
    "run_id": "r",
    "session_id": "s",
    "status": "completed",
    "verification": "unverified",
    "metadata": {"turns": 1},
}


def decode(text: str) -> list[StreamEvent]:
    decoder = SseDecoder()
    events = [decoder.feed(line) for line in text.splitlines()]
    return [e for e in events if e is not None]


def test_the_decoder_reads_the_servers_format() -> None:
    text = (
        'id: 1\nevent: run\ndata: {"run_id": "r"}\n\n'
        ": keep-alive\n\n"
        'id: 2\nevent: delta\ndata: {"text": "hi"}\n\n'
    )
    assert decode(text) == [
        StreamEvent(1, "run", {"run_id": "r"}),
        StreamEvent(2, "delta", {"text": "hi"}),
    ]


def test_the_decoder_follows_the_sse_rules() -> None:
    text = (
        "retry: 100\n"
        "data: [1,\ndata:2]\n\n"  # data lines join with a newline; the space is optional
        "event: gap\ndata: not json\n\n"  # no id: None
        "id: x\ndata: 3\n\n"  # a non-numeric id
        "event: lonely\n\n"  # no data: no event
        "id: 9\nevent: cut\ndata: {}"  # no blank line: never complete
    )
    assert decode(text) == [
        StreamEvent(None, "message", {"value": [1, 2]}),
        StreamEvent(None, "gap", {"text": "not json"}),
        StreamEvent(None, "message", {"value": 3}),
    ]


def test_event_helpers() -> None:
    result = StreamEvent(7, "result", RESULT)
    assert result.is_result
    assert result.is_terminal
    assert result.response() == ChatResponse(
        "done", "r", "s", "completed", "unverified", {"turns": 1}
    )
    assert result.response().completed
    assert StreamEvent(None, "error", {"error": "HTTP deadline passed"}).is_terminal
    assert StreamEvent(None, "run_error", {"error": "HTTP deadline passed"}).is_terminal
    delta = StreamEvent(3, "delta", {"text": "hi "})
    assert (delta.text, delta.is_result, delta.is_terminal) == ("hi ", False, False)
    assert StreamEvent(4, "tool.call", {"text": "not a delta"}).text == ""


def test_history_entries_keep_unknown_fields() -> None:
    entry = HistoryEntry.from_json(
        {
            "id": 3,
            "role": "tool",
            "content": "OK",
            "session_id": "s",
            "agent_id": "a",
            "run_id": None,
            "created_at": 1.5,
            "tool_call_id": "c1",
            "name": "echo",
            "future_field": True,
        }
    )
    assert (entry.role, entry.tool_call_id, entry.name, entry.run_id) == (
        "tool",
        "c1",
        "echo",
        None,
    )
    assert (entry.metadata, entry.tool_calls, entry.is_error) == (None, [], False)
    assert entry.extra == {"future_field": True}


def test_path_segments_are_encoded() -> None:
    assert segment("plain-id_1.2") == "plain-id_1.2"
    assert segment("team:alpha@x") == "team%3Aalpha%40x"
    assert segment("a/b") == "a%2Fb"
    assert (segment("."), segment("..")) == ("%2E", "%2E%2E")


def test_errors_pickle_and_list_their_fields() -> None:
    body = {"error": "invalid request body", "status": 422, "fields": {"text": "missing"}}
    error = SoulacyError(
        "POST /api/v1/chat: 422", method="POST", path="/api/v1/chat", status=422, body=body
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.status, copy.body, copy.method, copy.path) == (
        "POST /api/v1/chat: 422",
        422,
        body,
        "POST",
        "/api/v1/chat",
    )
    assert copy.fields == {"text": "missing"}
    assert SoulacyError("x", method="GET", path="/", body="text").fields == {}


# -- the stream's rules, on a mock transport -----------------------------------------------------


def sse(*events: tuple[int | None, str, dict[str, Any]]) -> bytes:
    out = ""
    for event_id, name, data in events:
        out += f"id: {event_id}\n" if event_id is not None else ""
        out += f"event: {name}\ndata: {json.dumps(data)}\n\n"
    return out.encode()


def stream_answer(body: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def mock(handler: Callable[[httpx.Request], httpx.Response]) -> tuple[Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return Client("http://soulacy.test", "k", transport=httpx.MockTransport(record)), seen


RUN = (1, "run", {"run_id": "r"})
DELTA = (2, "delta", {"text": "hi"})
END = (3, "result", RESULT)


def test_a_stream_that_ends_early_is_followed_up_and_repeats_are_skipped() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return stream_answer(sse(RUN, DELTA))  # ends without the result
        return stream_answer(sse(RUN, DELTA, (None, "gap", {"missed": 0}), END))  # all again

    client, seen = mock(handler)
    with client, client.stream("a", "hi") as stream:
        events = list(stream)
    assert [(e.id, e.event) for e in events] == [
        (1, "run"),
        (2, "delta"),
        (None, "gap"),
        (3, "result"),
    ]
    assert seen[1].url.path == "/api/v1/runs/r/events"
    assert seen[1].headers["last-event-id"] == "2"
    assert stream.response == ChatResponse.from_json(RESULT)


def test_a_transient_status_on_reconnection_is_retried_others_raise() -> None:
    answers = iter(
        [
            stream_answer(sse(RUN)),
            httpx.Response(503, json={"error": "restarting", "status": 503}),
            stream_answer(sse(DELTA, END)),
        ]
    )
    client, seen = mock(lambda request: next(answers))
    with client:
        assert client.stream("a", "hi").wait().reply == "done"
    assert [r.headers.get("last-event-id") for r in seen] == [None, "1", "1"]

    answers = iter(
        [stream_answer(sse(RUN)), httpx.Response(500, json={"error": "boom", "status": 500})]
    )
    client, seen = mock(lambda request: next(answers))
    with client, pytest.raises(SoulacyError) as caught:
        client.stream("a", "hi").wait()
    assert (caught.value.status, caught.value.body["error"]) == (500, "boom")
    assert str(caught.value) == "GET /api/v1/runs/r/events failed with HTTP 500: boom"


def test_a_failed_first_request_is_not_retried() -> None:
    client, seen = mock(lambda request: httpx.Response(503, text="busy"))
    with client, pytest.raises(SoulacyError) as caught:
        list(client.stream("a", "hi"))
    assert (caught.value.status, caught.value.body, len(seen)) == (503, "busy", 1)


def test_a_deadline_error_event_ends_the_stream_without_a_result() -> None:
    client, _ = mock(
        lambda request: stream_answer(sse(RUN, (None, "error", {"error": "HTTP deadline passed"})))
    )
    with client:
        stream = client.stream("a", "hi")
        assert [e.event for e in stream] == ["run", "error"]
        assert stream.response is None
        with pytest.raises(SoulacyError, match="HTTP deadline passed"):
            stream.wait()


def test_a_result_rebuilt_from_the_store_has_no_id() -> None:
    client, _ = mock(lambda request: stream_answer(sse((None, "result", RESULT))))
    with client:
        events = list(client.events("r", last_event_id=5))
    assert [(e.id, e.event) for e in events] == [(None, "result")]


def test_an_answer_that_is_not_the_expected_json_is_an_error() -> None:
    client, _ = mock(lambda request: httpx.Response(200, text="<html>a proxy page</html>"))
    with client, pytest.raises(SoulacyError) as caught:
        client.chat("a", "hi")
    assert caught.value.status == 200
    assert caught.value.body == "<html>a proxy page</html>"
    assert str(caught.value).startswith("POST /api/v1/chat: unexpected answer")


def test_chat_sends_only_the_options_given() -> None:
    client, seen = mock(lambda request: httpx.Response(200, json=RESULT))
    with client:
        client.chat("a", "hi")
        client.chat_response("a", "hi", "s", run_id="r", user_id="u", overrides={"max_turns": 2})
    assert json.loads(seen[0].content) == {"agent_id": "a", "text": "hi"}
    assert json.loads(seen[1].content) == {
        "agent_id": "a",
        "text": "hi",
        "session_id": "s",
        "run_id": "r",
        "user_id": "u",
        "overrides": {"max_turns": 2},
    }
    assert seen[0].headers["authorization"] == "Bearer k"


def test_the_sdk_imports_httpx_but_not_the_runtime_nor_trio() -> None:
    code = (
        "import sys, soulacy.sdk; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'soulacy', 'trio', 'attrs'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = ast.literal_eval(out)
    assert all(name.startswith("soulacy.sdk") or name == "soulacy" for name in loaded), loaded


# -- busy servers: 429 and Retry-After -----------------------------------------------------------


def busy(status: int, retry_after: str | None) -> httpx.Response:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    return httpx.Response(status, headers=headers, json={"error": "busy", "status": status})


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits of the synchronous client's stream loop, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr("soulacy.sdk._client.sleep", slept.append)
    return slept


@pytest.mark.parametrize("status", [429, 503])
def test_a_reconnection_refused_as_busy_waits_as_long_as_retry_after_says(
    status: int, sleeps: list[float]
) -> None:
    answers = iter([stream_answer(sse(RUN)), busy(status, "2"), stream_answer(sse(DELTA, END))])
    client, seen = mock(lambda request: next(answers))
    with client:
        assert client.stream("a", "hi").wait().reply == "done"
    assert [r.headers.get("last-event-id") for r in seen] == [None, "1", "1"]
    assert sleeps == [0.0, 0.0, 2.0]  # the first reconnection at once, the next when told


def test_a_429_without_retry_after_backs_off_and_counts_against_the_budget(
    sleeps: list[float],
) -> None:
    client, seen = mock(
        lambda request: stream_answer(sse(RUN)) if request.method == "POST" else busy(429, None)
    )
    client.max_reconnects = 3
    with client, pytest.raises(SoulacyError) as caught:
        client.stream("a", "hi").wait()
    assert caught.value.status == 429
    assert str(caught.value).endswith("(gave up after 3 reconnections)")
    assert len(seen) == 4  # the POST, then three reconnections
    assert sleeps == [0.0, 0.0, 0.5, 1.0]


def test_a_retry_after_longer_than_a_minute_is_not_waited_for(sleeps: list[float]) -> None:
    answers = iter([stream_answer(sse(RUN)), busy(429, "3600")])
    client, seen = mock(lambda request: next(answers))
    with client, pytest.raises(SoulacyError) as caught:
        client.stream("a", "hi").wait()
    assert (caught.value.status, caught.value.body["error"]) == (429, "busy")
    assert str(caught.value) == (
        "GET /api/v1/runs/r/events failed with HTTP 429: busy"
        " (the server asks to retry after 3600 s)"
    )
    assert (len(seen), sleeps) == (2, [0.0, 0.0])


STARTS: dict[str, Callable[[Client], object]] = {
    "chat": lambda client: client.chat("a", "hi"),
    "stream": lambda client: client.stream("a", "hi").wait(),
}


@pytest.mark.parametrize("start", STARTS.values(), ids=list(STARTS))
def test_a_429_that_refuses_to_start_a_run_is_not_retried(
    start: Callable[[Client], object],
) -> None:
    client, seen = mock(lambda request: busy(429, "1"))
    with client, pytest.raises(SoulacyError) as caught:
        start(client)
    assert (caught.value.status, len(seen)) == (429, 1)


async def test_the_async_client_follows_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("soulacy.sdk._async._sleep", sleep)
    answers = iter([stream_answer(sse(RUN)), busy(429, "2"), stream_answer(sse(DELTA, END))])
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return next(answers)

    transport = httpx.MockTransport(handler)
    async with AsyncClient("http://soulacy.test", "k", transport=transport) as client:
        response = await client.stream("a", "hi").wait()
    assert response == ChatResponse.from_json(RESULT)
    assert [r.headers.get("last-event-id") for r in seen] == [None, "1", "1"]
    assert slept == [0.0, 0.0, 2.0]


def test_retry_after_is_read_as_seconds_or_as_a_date() -> None:
    def after(value: str) -> float | None:
        return retry_after(httpx.Response(429, headers={"retry-after": value}), now=1_000_000_000)

    assert after("7") == 7.0
    assert after(" 0 ") == 0.0
    assert after("Sun, 09 Sep 2001 01:49:00 GMT") == 140.0  # now is 01:46:40
    assert after("Sun, 09 Sep 2001 01:00:00 GMT") == 0.0  # already passed
    assert after("soon") is None
    assert after("-5") is None
    assert retry_after(httpx.Response(503)) is None


def test_json_bodies_are_sent_as_application_json() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/cancel"):
            return httpx.Response(200, json={"cancelled": True})
        if request.method == "PATCH":
            return httpx.Response(200, json={"changed": []})
        if request.url.path.endswith("/stream"):
            return stream_answer(sse(RUN, END))
        return httpx.Response(200, json=RESULT)

    client, seen = mock(handler)
    with client:
        client.chat("a", "hi")
        client.stream("a", "hi").wait()
        client.cancel("r")
        client.update_config({"server": {}})
        client.run("r")
    bodies = [r for r in seen if r.content]
    assert [(r.method, r.url.path) for r in bodies] == [
        ("POST", "/api/v1/chat"),
        ("POST", "/api/v1/chat/stream"),
        ("POST", "/api/v1/chat/cancel"),
        ("PATCH", "/api/v1/config"),
    ]
    assert {r.headers["content-type"] for r in bodies} == {"application/json"}
    assert "content-type" not in seen[-1].headers  # a GET carries no body


def test_a_204_from_the_events_route_ends_the_stream_instead_of_reconnecting_forever() -> None:
    """The server answers 204 when a finished run holds nothing past Last-Event-ID."""
    answers = iter([stream_answer(sse(RUN)), httpx.Response(204)])
    client, seen = mock(lambda request: next(answers))
    with client, pytest.raises(SoulacyError) as caught:
        client.stream("a", "hi").wait()
    assert len(seen) == 2, "no reconnection after the 204"
    assert caught.value.status == 204
    assert "the run has ended" in str(caught.value)
