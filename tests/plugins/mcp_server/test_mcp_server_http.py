"""Agents as MCP tools over streamable HTTP at ``/mcp``, exercised by the official MCP client SDK
against a real server on 127.0.0.1, with the test principals' keys."""

from __future__ import annotations

import math
from collections.abc import Callable

import httpx
import pytest
import trio
from _support.http_server import KEYS, keyed_config, open_server
from mcp.shared.exceptions import MCPError
from mcp_server_support import MODES, agents, http_client, text_of
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    return workspace


@pytest.mark.parametrize("mode", MODES)
async def test_every_usable_agent_is_a_tool_described_by_its_soul_yaml(
    served: Workspace, make_kernel: Callable[..., Kernel], mode: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        http_client(server.url, KEYS["alice"], mode) as client,
    ):
        listed = await client.list_tools()
        era = client.protocol_version
    assert (era in MODERN_PROTOCOL_VERSIONS) == (mode == "auto")  # both eras are served
    tools = {tool.name: tool for tool in listed.tools}
    # not the disabled agent, nor the one whose id is no tool name
    assert sorted(tools) == ["echo", "short"]
    assert tools["echo"].description == "Says hello."
    assert tools["echo"].input_schema["required"] == ["text"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_is_a_run_of_the_agent_answered_with_its_reply_and_run_id(
    served: Workspace, make_kernel: Callable[..., Kernel], mode: str
) -> None:
    async with open_server(make_kernel) as server:
        async with http_client(server.url, KEYS["alice"], mode) as client:
            result = await client.call_tool("echo", {"text": "hi"})
        assert not result.is_error
        assert text_of(result) == "hello there"
        assert result.meta is not None
        run_id = result.meta["run_id"]
        assert result.meta["status"] == "completed"
        stored = await server.kernel.store().get_run(run_id)
        assert stored is not None
        assert stored.agent_id == "echo"
        assert stored.principal == "alice"  # the caller's principal owns the run


async def test_a_run_that_does_not_complete_answers_a_tool_error_with_its_status_and_reason(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, http_client(server.url, KEYS["alice"]) as client:
        result = await client.call_tool("short", {"text": "go"})
    assert result.is_error
    assert result.meta is not None
    assert result.meta["status"] == "incomplete"
    reason = result.meta["incomplete_reason"]
    assert reason
    assert f"run {result.meta['run_id']} of agent 'short' ended incomplete: {reason}" in (
        text_of(result)
    )


async def test_a_key_is_required_and_bob_never_sees_alices_run(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        for key in (None, "not-a-key"):
            statuses: list[int] = []
            with pytest.RaisesGroup(MCPError, flatten_subgroups=True):  # the SDK's nurseries
                async with http_client(server.url, key, statuses=statuses) as client:
                    await client.list_tools()
            assert statuses
            assert set(statuses) == {401}
        async with httpx.AsyncClient(base_url=server.url) as raw:
            answer = await raw.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert answer.status_code == 401

        async with http_client(server.url, KEYS["alice"]) as client:
            result = await client.call_tool("echo", {"text": "mine"})
        assert result.meta is not None
        run_id = result.meta["run_id"]
        async with server.client("bob") as bob, server.client("alice") as alice:
            assert (await bob.get(f"/runs/{run_id}")).status_code == 404
            assert (await alice.get(f"/runs/{run_id}")).status_code == 200


async def test_a_session_id_continues_the_callers_own_conversation(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        async with http_client(server.url, KEYS["alice"]) as client:
            first = await client.call_tool("echo", {"text": "one"})
            assert first.meta is not None
            session = first.meta["session_id"]
            second = await client.call_tool("echo", {"text": "two", "session_id": session})
        async with http_client(server.url, KEYS["bob"]) as client:
            bobs = await client.call_tool("echo", {"text": "three", "session_id": session})
        assert second.meta is not None
        assert bobs.meta is not None
        assert second.meta["session_id"] == bobs.meta["session_id"] == session
        store = server.kernel.store()
        alices = await store.load_history("echo", session, "alice")
        his = await store.load_history("echo", session, "bob")  # what his run's model was given
    assert [m.content for m in alices if m.role == "user"] == ["one", "two"]
    assert [m.content for m in his if m.role == "user"] == ["three"]  # none of alice's


async def test_wrong_arguments_are_tool_errors_and_an_unknown_tool_a_protocol_error(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, http_client(server.url, KEYS["alice"]) as client:
        missing = await client.call_tool("echo", {})
        extra = await client.call_tool("echo", {"text": "hi", "temperature": 2})
        with pytest.raises(MCPError, match="unknown tool 'off'"):
            await client.call_tool("off", {"text": "hi"})
    assert missing.is_error
    assert "expected the argument text" in text_of(missing)
    assert extra.is_error
    assert "unexpected arguments: temperature" in text_of(extra)


async def test_get_answers_405_there_is_no_server_initiated_stream(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as api:
        answer = await api.get(server.url + "/mcp", headers={"accept": "text/event-stream"})
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"


async def test_without_the_sdk_mcp_answers_503_saying_what_to_install(
    served: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing() -> None:
        raise ModuleNotFoundError("No module named 'mcp'")

    monkeypatch.setattr("soulacy.plugins.mcp_server._http._import_sdk", missing)
    async with open_server(make_kernel) as server, server.client("alice") as api:
        for _ in range(2):  # and again: the start is not retried per request
            answer = await api.post(
                server.url + "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"accept": "application/json, text/event-stream"},
            )
            assert answer.status_code == 503
            assert "pip install 'soulacy[mcp]'" in answer.json()["error"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_the_client_gives_up_over_http_leaves_its_run_to_finish(
    served: Workspace, make_kernel: Callable[..., Kernel], mode: str
) -> None:
    served.scripted_agent("pause", [{"text": "after a pause", "sleep": 1}], repeat=True)
    async with open_server(make_kernel) as server:
        events = server.kernel.events.subscribe(buffer=math.inf)
        async with http_client(server.url, KEYS["alice"], mode) as client:
            with trio.move_on_after(0.3):
                await client.call_tool("pause", {"text": "wait"})
        with trio.fail_after(20):
            async for event in events:
                if event.type == "run.completed":
                    break
        (run,) = await server.kernel.store().list_runs(principal="alice")
    assert run.agent_id == "pause"
    assert run.status == "completed"  # a route of the HTTP plugin does not see its client go
