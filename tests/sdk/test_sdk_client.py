"""The synchronous Client against a live server (the client runs in a worker thread)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sdk_support import GREETING, STEPS_REPLY, LiveServer, Requested, in_thread, record

from soulacy.sdk import ChatResponse, Client, HistoryEntry, SoulacyError, StreamEvent


async def test_chat_returns_the_reply_as_a_string(server: LiveServer) -> None:
    def call() -> str:
        with server.client() as client:
            return client.chat("hello", "hi")

    reply = await in_thread(call)
    assert isinstance(reply, str)
    assert reply == GREETING


async def test_chat_response_has_the_full_metadata(server: LiveServer) -> None:
    def call() -> ChatResponse:
        with server.client() as client:
            return client.chat_response("steps", "go", user_id="u-1", run_id="run-meta")

    response = await in_thread(call)
    assert (response.reply, response.run_id, response.status) == (
        STEPS_REPLY,
        "run-meta",
        "completed",
    )
    assert response.completed
    assert response.verification == "unverified"
    assert response.session_id
    meta = response.metadata
    assert (meta["run_id"], meta["session_id"], meta["agent_id"]) == (
        "run-meta",
        response.session_id,
        "steps",
    )
    assert (meta["turns"], meta["llm_calls"], meta["tool_calls"]) == (3, 3, 2)
    assert {"tokens", "started_at", "finished_at", "duration_s", "proof"} <= meta.keys()
    assert meta["proof"]["receipts"] == 2


async def test_chat_honours_the_session_id_and_history_shows_both_messages(
    server: LiveServer,
) -> None:
    def call() -> tuple[ChatResponse, ChatResponse, list[HistoryEntry]]:
        with server.client() as client:
            first = client.chat_response("hello", "first message", "sess-1")
            second = client.chat_response("hello", "second message", session_id="sess-1")
            return first, second, client.history("sess-1")

    first, second, history = await in_thread(call)
    assert first.session_id == second.session_id == "sess-1"
    assert first.run_id != second.run_id
    assert [(e.role, e.content) for e in history] == [
        ("user", "first message"),
        ("assistant", GREETING),
        ("user", "second message"),
        ("assistant", GREETING),
    ]
    assert {e.session_id for e in history} == {"sess-1"}
    assert [e.run_id for e in history] == [first.run_id] * 2 + [second.run_id] * 2
    assert all(isinstance(e, HistoryEntry) and e.agent_id == "hello" for e in history)
    assert history[1].metadata is not None
    assert history[1].metadata["status"] == "completed"


async def test_ids_with_every_allowed_character_reach_their_run_and_session(
    server: LiveServer,
) -> None:
    def call() -> tuple[ChatResponse, list[HistoryEntry], dict[str, object], list[StreamEvent]]:
        with server.client() as client:
            response = client.chat_response("hello", "hi", "team:alpha@2024.1", run_id="r:1@x.y")
            return (
                response,
                client.history("team:alpha@2024.1"),
                client.run("r:1@x.y"),
                list(client.events("r:1@x.y")),
            )

    response, history, record, events = await in_thread(call)
    assert (response.session_id, response.run_id) == ("team:alpha@2024.1", "r:1@x.y")
    assert len(history) == 2
    assert record["session_id"] == "team:alpha@2024.1"
    assert events[-1].response().run_id == "r:1@x.y"


async def test_chat_without_a_session_starts_a_new_one_each_time(server: LiveServer) -> None:
    def call() -> tuple[str, str]:
        with server.client() as client:
            return (
                client.chat_response("hello", "a").session_id,
                client.chat_response("hello", "b").session_id,
            )

    one, two = await in_thread(call)
    assert one != two


async def test_stream_yields_typed_events_ending_with_the_result(server: LiveServer) -> None:
    def call() -> tuple[list[StreamEvent], ChatResponse | None, str | None]:
        with server.client() as client, client.stream("steps", "go", "sess-s") as events:
            return list(events), events.response, events.run_id

    events, response, run_id = await in_thread(call)
    assert all(isinstance(e, StreamEvent) for e in events)
    assert [e.event for e in events] == [
        "run",
        "run.limits",
        "tool.call",
        "tool.result",
        "tool.call",
        "tool.result",
        "delta",
        "delta",
        "delta",
        "result",
    ]
    assert [e.id for e in events] == list(range(1, 11))
    assert events[0].data["run_id"] == run_id
    assert events[2].data["name"] == "echo"
    assert "".join(e.text for e in events) == STEPS_REPLY
    assert [e.is_result for e in events] == [False] * 9 + [True]
    assert events[-1].is_terminal
    assert events[-1].response() == response
    assert response is not None
    assert (response.reply, response.session_id, response.run_id) == (STEPS_REPLY, "sess-s", run_id)
    with pytest.raises(ValueError, match="carries no result"):
        events[0].response()


async def test_stream_of_a_workflow_without_deltas_ends_with_the_result(
    server: LiveServer,
) -> None:
    def call() -> list[StreamEvent]:
        with server.client() as client:
            return list(client.stream("wf", "quiet"))

    events = await in_thread(call)
    names = [e.event for e in events]
    assert "delta" not in names
    assert names.count("workflow.step") == 4
    assert names[0] == "run"
    assert names[-1] == "result"
    assert events[-1].response().reply == "QUIET!"
    assert [e.id for e in events] == list(range(1, len(events) + 1))


async def test_wait_returns_the_outcome_of_a_stream(server: LiveServer) -> None:
    def call() -> ChatResponse:
        with server.client() as client:
            return client.stream("hello", "hi").wait()

    response = await in_thread(call)
    assert (response.reply, response.status) == (GREETING, "completed")


async def test_cancel_stops_a_running_run(server: LiveServer) -> None:
    def call() -> tuple[bool, list[StreamEvent], bool, dict[str, object]]:
        with server.client() as client, client.stream("slow", "take your time") as events:
            first = next(events)
            assert first.event == "run"
            cancelled = client.cancel(first.data["run_id"])
            rest = list(events)
            again = client.cancel(first.data["run_id"])
            return cancelled, [first, *rest], again, client.run(first.data["run_id"])

    cancelled, events, again, record = await in_thread(call)
    assert cancelled is True
    result = events[-1].response()
    assert (result.status, result.reply) == ("cancelled", "")
    assert result.metadata["incomplete_reason"] == "cancelled"
    assert again is False  # finished by now
    assert (record["status"], record["running"]) == ("cancelled", False)


async def test_run_agents_preparation_and_health(server: LiveServer) -> None:
    def call() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any], object]:
        with server.client() as client:
            response = client.chat_response("hello", "hi")
            return (
                client.run(response.run_id),
                client.agents(),
                client.preparation("hello"),
                client.health(),
            )

    record, agents, preparation, health = await in_thread(call)
    assert (record["status"], record["agent_id"], record["running"]) == (
        "completed",
        "hello",
        False,
    )
    assert isinstance(record["proof"], dict)
    assert {a["id"] for a in agents} >= {"hello", "steps", "slow", "wf"}
    assert all(a["enabled"] for a in agents)
    assert preparation["agent_id"] == "hello"
    assert preparation["policy"]["http_timeout"]["value"] == 172_860.0
    assert health == {"status": "ok"}


async def test_config_is_for_admins(server: LiveServer) -> None:
    def call() -> tuple[dict[str, Any], list[str], SoulacyError]:
        with server.client() as alice, server.client("key-b") as bob:
            changed = alice.update_config({"server": {"events_per_run": 5000}})
            config = alice.config()
            with pytest.raises(SoulacyError) as denied:
                bob.config()
            return config, changed, denied.value

    config, changed, denied = await in_thread(call)
    assert changed == ["server.events_per_run"]
    assert config["server"]["events_per_run"] == 5000
    assert denied.status == 403


# -- errors ------------------------------------------------------------------------------------


async def test_a_wrong_api_key_raises_a_401(server: LiveServer) -> None:
    def call() -> SoulacyError:
        with server.client("not-the-key") as client, pytest.raises(SoulacyError) as caught:
            client.chat("hello", "hi")
        return caught.value

    error = await in_thread(call)
    assert isinstance(error, Exception)
    assert error.status == 401
    assert error.body == {"error": "missing or invalid bearer token", "status": 401}
    assert "POST /api/v1/chat" in str(error)
    assert (error.method, error.path) == ("POST", "/api/v1/chat")


async def test_a_missing_api_key_raises_a_401(server: LiveServer) -> None:
    def call() -> int | None:
        with server.client(None) as client, pytest.raises(SoulacyError) as caught:
            client.agents()
        return caught.value.status

    assert await in_thread(call) == 401


async def test_another_principals_run_is_not_found(server: LiveServer) -> None:
    def call() -> list[SoulacyError]:
        errors = []
        with server.client() as alice, server.client("key-b") as bob:
            mine = alice.chat_response("hello", "private", "alice-session")
            attempts: list[Callable[[], object]] = [
                lambda: bob.run(mine.run_id),
                lambda: bob.cancel(mine.run_id),
                lambda: list(bob.events(mine.run_id)),
                lambda: bob.history("alice-session"),
            ]
            for attempt in attempts:
                with pytest.raises(SoulacyError) as caught:
                    attempt()
                errors.append(caught.value)
            assert alice.run(mine.run_id)["status"] == "completed"  # still hers
        return errors

    errors = await in_thread(call)
    assert [e.status for e in errors] == [404, 404, 404, 404]
    assert "GET /api/v1/runs/" in str(errors[0])
    assert "POST /api/v1/chat/cancel" in str(errors[1])
    assert str(errors[2]).startswith("GET /api/v1/runs/")
    assert "/events" in str(errors[2])


async def test_unknown_agent_and_invalid_body(server: LiveServer) -> None:
    def call() -> tuple[SoulacyError, SoulacyError, SoulacyError]:
        with server.client() as client:
            with pytest.raises(SoulacyError) as unknown:
                client.chat("nobody", "hi")
            with pytest.raises(SoulacyError) as invalid:
                client.chat("hello", "hi", session_id="spaces are not allowed")
            with pytest.raises(SoulacyError) as streamed:
                list(client.stream("nobody", "hi"))
            return unknown.value, invalid.value, streamed.value

    unknown, invalid, streamed = await in_thread(call)
    assert (unknown.status, unknown.body["error"]) == (404, "no agent 'nobody'")
    assert invalid.status == 422
    assert "session_id" in invalid.fields
    assert "session_id" in str(invalid)
    assert streamed.status == 404
    assert "POST /api/v1/chat/stream" in str(streamed)


async def test_too_many_runs_is_a_429_that_the_client_does_not_retry(server: LiveServer) -> None:
    """Nothing was started: the caller decides whether to wait as long as Retry-After says."""

    def call() -> tuple[SoulacyError, SoulacyError, Requested, str]:
        with server.client() as client, client.stream("slow", "take your time") as slow:
            client.update_config({"runtime": {"max_concurrent_sessions_per_principal": 1}})
            run_id = next(slow).data["run_id"]  # the "run" event: the slow run holds the slot
            requests = record(client)
            with pytest.raises(SoulacyError) as chat:
                client.chat("hello", "hi")
            with pytest.raises(SoulacyError) as streamed:
                client.stream("hello", "hi").wait()
            refused = list(requests)
            client.cancel(run_id)
            return chat.value, streamed.value, refused, slow.wait().status

    chat, streamed, refused, slow_status = await in_thread(call)
    assert (chat.status, streamed.status) == (429, 429)
    assert chat.body["limit"]["key"] == "runtime.max_concurrent_sessions_per_principal"
    assert str(chat).startswith("POST /api/v1/chat failed with HTTP 429: too many concurrent runs")
    assert "POST /api/v1/chat/stream" in str(streamed)
    assert refused == [("POST", "/api/v1/chat", None), ("POST", "/api/v1/chat/stream", None)]
    assert slow_status == "cancelled"


async def test_no_server_is_a_connection_error_without_status() -> None:
    def call() -> SoulacyError:
        with Client("http://127.0.0.1:9", "k", timeout=30) as client:  # the discard port
            with pytest.raises(SoulacyError) as caught:
                client.health()
            return caught.value

    error = await in_thread(call)
    assert error.status is None
    assert error.body is None
    assert str(error).startswith("GET /api/v1/health: no answer")
