"""AsyncClient: the same methods as Client, under Trio (the test's loop) and asyncio."""

from __future__ import annotations

import asyncio

import pytest
from sdk_support import GREETING, STEPS_REPLY, TIMEOUT, LiveServer, in_thread

from soulacy.sdk import AsyncClient, ChatResponse, HistoryEntry, SoulacyError, StreamEvent


async def test_chat_and_chat_response(server: LiveServer) -> None:
    async with server.async_client() as client:
        reply = await client.chat("hello", "hi")
        response = await client.chat_response("steps", "go", "async-session", run_id="async-run")
    assert reply == GREETING
    assert isinstance(response, ChatResponse)
    assert (response.reply, response.run_id, response.session_id) == (
        STEPS_REPLY,
        "async-run",
        "async-session",
    )
    assert (response.status, response.verification) == ("completed", "unverified")
    assert (response.metadata["tool_calls"], response.metadata["agent_id"]) == (2, "steps")


async def test_session_and_history(server: LiveServer) -> None:
    async with server.async_client() as client:
        first = await client.chat_response("hello", "one", "s-async")
        second = await client.chat_response("hello", "two", session_id="s-async")
        history = await client.history("s-async")
    assert first.session_id == second.session_id == "s-async"
    assert all(isinstance(e, HistoryEntry) for e in history)
    assert [(e.role, e.content) for e in history] == [
        ("user", "one"),
        ("assistant", GREETING),
        ("user", "two"),
        ("assistant", GREETING),
    ]


async def test_stream_and_replay(server: LiveServer) -> None:
    async with server.async_client() as client:
        async with client.stream("steps", "go") as stream:
            events = [event async for event in stream]
        run_id = stream.run_id
        assert run_id is not None
        assert run_id == events[0].data["run_id"]
        replay = [event async for event in client.events(run_id)]
        later = [event async for event in client.events(run_id, last_event_id=8)]
    assert all(isinstance(e, StreamEvent) for e in events)
    assert events == replay
    assert [e.id for e in later] == [9, 10]
    assert events[-1].is_result
    assert stream.response == events[-1].response()
    assert "".join(e.text for e in events) == STEPS_REPLY


async def test_stream_of_a_workflow(server: LiveServer) -> None:
    async with server.async_client() as client:
        response = await client.stream("wf", "calm").wait()
    assert (response.reply, response.status) == ("CALM!", "completed")


async def test_cancel_after_the_first_event_and_stop_reading(server: LiveServer) -> None:
    async with server.async_client() as client:
        async with client.stream("slow", "take your time") as stream:
            async for event in stream:
                run_id = event.data["run_id"]  # the first event, "run"
                break  # stop reading: the run goes on
        assert (await client.run(run_id))["running"] is True
        assert await client.cancel(run_id) is True
        result = await client.events(run_id).wait()
        assert await client.cancel(run_id) is False
    assert result.status == "cancelled"


async def test_reading_methods(server: LiveServer) -> None:
    async with server.async_client() as client:
        run_id = (await client.chat_response("hello", "hi")).run_id
        record = await client.run(run_id)
        agents = await client.agents()
        preparation = await client.preparation("steps")
        health = await client.health()
        changed = await client.update_config({"server": {"finished_runs_kept": 50}})
        config = await client.config()
    assert (record["run_id"], record["status"]) == (run_id, "completed")
    assert "steps" in {a["id"] for a in agents}
    assert preparation["policy"]["agent_id"] == "steps"
    assert health == {"status": "ok"}
    assert changed == ["server.finished_runs_kept"]
    assert config["server"]["finished_runs_kept"] == 50


async def test_errors(server: LiveServer) -> None:
    async with server.async_client() as alice, server.async_client("key-b") as bob:
        run_id = (await alice.chat_response("hello", "mine")).run_id
        with pytest.raises(SoulacyError) as other:
            await bob.run(run_id)
        with pytest.raises(SoulacyError) as replay:
            await bob.events(run_id).wait()
    async with server.async_client("wrong") as stranger:
        with pytest.raises(SoulacyError) as wrong:
            await stranger.chat("hello", "hi")
        with pytest.raises(SoulacyError) as streamed:
            await stranger.stream("hello", "hi").wait()
    async with AsyncClient("http://127.0.0.1:9", "k", 30) as nowhere:
        with pytest.raises(SoulacyError) as unanswered:
            await nowhere.agents()
    assert (other.value.status, replay.value.status) == (404, 404)
    assert (wrong.value.status, streamed.value.status) == (401, 401)
    assert wrong.value.body["error"] == "missing or invalid bearer token"
    assert "POST /api/v1/chat/stream" in str(streamed.value)
    assert unanswered.value.status is None
    assert "GET /api/v1/agents" in str(unanswered.value)


async def test_the_async_client_runs_under_asyncio_too(server: LiveServer) -> None:
    async def main() -> tuple[str, list[str]]:
        async with AsyncClient(server.url, "key-a", TIMEOUT) as client:
            reply = await client.chat("hello", "hi")
            async with client.stream("steps", "go") as stream:
                names = [event.event async for event in stream]
            return reply, names

    reply, names = await in_thread(lambda: asyncio.run(main()))
    assert reply == GREETING
    assert names[0] == "run"
    assert names[-1] == "result"


async def test_the_async_client_sleeps_with_trio_even_where_an_asyncio_loop_is_marked_running() -> (
    None
):
    """Playwright's sync API leaves an asyncio loop marked as running in its thread; a Trio task
    there must still sleep with Trio (the client asks sniffio, as httpx does)."""
    import trio

    from soulacy.sdk._async import _sleep

    loop = asyncio.new_event_loop()
    asyncio._set_running_loop(loop)
    try:
        with trio.fail_after(10):
            await _sleep(0.01)
    finally:
        asyncio._set_running_loop(None)
        loop.close()
