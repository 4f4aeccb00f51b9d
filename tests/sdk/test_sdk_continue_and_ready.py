"""``Client.continue_run`` and ``AsyncClient.continue_run`` against a live server: an
incomplete run goes on in place; another principal's is not found."""

from __future__ import annotations

import pytest
from sdk_support import STEPS_REPLY, LiveServer, in_thread

from soulacy.sdk import ChatResponse, SoulacyError


async def test_the_client_continues_an_incomplete_run(server: LiveServer) -> None:
    def call() -> tuple[ChatResponse, ChatResponse]:
        with server.client() as client:
            stopped = client.chat_response(
                "steps", "go", run_id="cont-1", overrides={"max_turns": 1}
            )
            return stopped, client.continue_run("cont-1", overrides={"max_turns": 5})

    stopped, done = await in_thread(call)
    assert (stopped.status, stopped.metadata["incomplete_reason"]) == ("incomplete", "max_turns")
    assert (done.run_id, done.session_id) == ("cont-1", stopped.session_id)
    assert (done.status, done.reply, done.metadata["attempt"]) == ("completed", STEPS_REPLY, 2)


async def test_the_async_client_continues_and_another_principal_cannot(
    server: LiveServer,
) -> None:
    async with server.async_client() as alice, server.async_client("key-b") as bob:
        await alice.chat_response("steps", "go", run_id="cont-2", overrides={"max_turns": 1})
        with pytest.raises(SoulacyError) as refused:
            await bob.continue_run("cont-2", overrides={"max_turns": 5})
        assert refused.value.status == 404
        done = await alice.continue_run("cont-2", "finish it", overrides={"max_turns": 5})
        assert done.status == "completed"
        with pytest.raises(SoulacyError) as again:
            await alice.continue_run("cont-2")
        assert again.value.status == 409


async def test_ready_says_the_server_takes_requests(server: LiveServer) -> None:
    def call() -> dict[str, object]:
        with server.client(None) as client:  # no key needed, as for health
            return client.ready()

    answer = await in_thread(call)
    assert answer["status"] == "ready"
    async with server.async_client(None) as client:
        assert (await client.ready())["status"] == "ready"
