"""Remote A2A agents as tools (SOUL.yaml ``a2a_agents``): called by an agent of a real kernel,
against the a2a-sdk's own sample server and against Soulacy's A2A server, on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from _support.http_server import KEYS, keyed_config, open_server
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from a2a_support import a2a_client, agents

from soulacy.kernel import ConfigError, Kernel, RunResult, UsageError
from soulacy.plugins.a2a import _client
from soulacy.testing import Workspace

SAMPLE = Path(__file__).with_name("sdk_sample_server.py")


@pytest.fixture(params=["1.0", "0.3"])
async def sample_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """The SDK's helloworld sample agent, in a process of its own, speaking A2A 1.0 (as the
    sample is written) or 0.3 (its card offering only 0.3)."""
    version = [] if request.param == "1.0" else [request.param]
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SAMPLE), *version], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        printed = b""
        with trio.fail_after(60):
            while not printed.endswith(b"\n"):
                chunk = await process.stdout.receive_some(64)
                assert chunk, "the sample server ended before it printed its port"
                printed += chunk
        yield f"http://127.0.0.1:{int(printed)}"
    finally:
        process.terminate()
        with trio.fail_after(30):
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


def caller(workspace: Workspace, remote: dict[str, object], text: str = "hi") -> None:
    """An agent whose first turn calls the remote agent ``helper`` as a tool, and then ends."""
    workspace.scripted_agent(
        "caller",
        [
            {"tool": "a2a__helper", "arguments": {"text": text}, "id": "call-1"},
            {"text": "asked"},
        ],
        a2a_agents={"helper": remote},
    )


async def tool_result(kernel: Kernel, result: RunResult) -> tuple[str, bool]:
    records = await kernel.store().load_tool_records(result.run_id)
    record = records["call-1"]
    return record.content, record.is_error


async def test_an_agent_calls_the_sdks_sample_agent_as_a_tool(
    workspace: Workspace, make_kernel: Callable[..., Kernel], sample_url: str
) -> None:
    caller(workspace, {"url": sample_url})
    kernel = make_kernel()
    result = await kernel.run("caller", "go")
    assert result.status == "completed"
    content, is_error = await tool_result(kernel, result)
    assert not is_error
    assert "Hello, World! I have received your request (hi)" in content
    assert result.proof is not None
    assert result.proof["receipts"] >= 1  # a receipt of the call, as of any tool's


async def test_an_agent_calls_a_soulacy_agent_over_a2a_with_a_key_from_the_environment(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.write_config(keyed_config())
    agents(workspace)
    monkeypatch.setenv("HELPER_KEY", KEYS["bob"])
    async with open_server(make_kernel) as server:
        # The agent's endpoint, named by the URL of its card's folder.
        caller(workspace, {"url": f"{server.url}/api/v1/a2a/echo", "api_key_env": "HELPER_KEY"})
        result = await server.kernel.run("caller", "go", principal="alice")
        content, is_error = await tool_result(server.kernel, result)
        assert not is_error
        assert content.startswith("hello there")
        remote = [r for r in await server.kernel.store().list_runs() if r.agent_id == "echo"]
    assert [r.principal for r in remote] == ["bob"]  # the key's principal, not the caller's


async def test_a_remote_task_that_does_not_complete_is_a_tool_error_saying_its_state(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.write_config(keyed_config())
    agents(workspace)
    monkeypatch.setenv("HELPER_KEY", KEYS["bob"])
    async with open_server(make_kernel) as server:
        caller(workspace, {"url": f"{server.url}/api/v1/a2a/short", "api_key_env": "HELPER_KEY"})
        result = await server.kernel.run("caller", "go", principal="alice")
        content, is_error = await tool_result(server.kernel, result)
    assert is_error
    assert "remote A2A agent 'helper' ended TASK_STATE_FAILED" in content
    assert "ended incomplete" in content


async def test_a_missing_key_variable_is_a_tool_error_naming_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_A2A_KEY", raising=False)
    caller(workspace, {"url": "http://127.0.0.1:9/", "api_key_env": "NO_SUCH_A2A_KEY"})
    kernel = make_kernel()
    result = await kernel.run("caller", "go")
    content, is_error = await tool_result(kernel, result)
    assert is_error
    assert "NO_SUCH_A2A_KEY" in content


def test_a_remote_agent_with_a_bad_name_or_url_is_a_config_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "caller", [{"text": "x"}], a2a_agents={"two__parts": {"url": "ftp://example.com"}}
    )
    kernel = make_kernel()
    with pytest.raises((ConfigError, UsageError)) as raised:
        kernel.agent("caller")
    message = str(raised.value)
    assert "a2a_agents.two__parts" in message
    assert "a2a_agents.two__parts.url" in message


async def test_a_retried_run_replays_the_remote_agents_answer_instead_of_asking_again(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.write_config(keyed_config())
    agents(workspace)
    monkeypatch.setenv("HELPER_KEY", KEYS["bob"])
    async with open_server(make_kernel) as server:
        caller(workspace, {"url": f"{server.url}/api/v1/a2a/echo", "api_key_env": "HELPER_KEY"})
        options = {"principal": "alice", "run_id": "retried", "session_id": "s-retried"}
        first = await server.kernel.run("caller", "go", **options)
        again = await server.kernel.run("caller", "go", **options)  # the same run id: a retry
        remote = [r for r in await server.kernel.store().list_runs() if r.agent_id == "echo"]
    assert (first.status, again.status, again.attempt) == ("completed", "completed", 2)
    assert len(remote) == 1  # the call id's recorded result was replayed


# Cut mid-stream, the stream's response is left to the garbage collector (httpcore's body
# generator), which Trio reports as a ResourceWarning.
CUT_STREAM_LEAK = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@CUT_STREAM_LEAK
@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "polled"])
async def test_a_cancelled_run_cancels_the_remote_task_it_was_waiting_for(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    monkeypatch: pytest.MonkeyPatch,
    streaming: bool,
) -> None:
    workspace.write_config(keyed_config())
    agents(workspace)
    monkeypatch.setenv("HELPER_KEY", KEYS["bob"])
    if not streaming:  # a remote agent whose card says it does not stream: polled with GetTask
        read_card = _client.RemoteCall._endpoint

        async def not_streaming(self: _client.RemoteCall, http: Any) -> _client.Endpoint:
            return attrs.evolve(await read_card(self, http), streaming=False)

        monkeypatch.setattr(_client.RemoteCall, "_endpoint", not_streaming)
    # The call's task id is known (from the stream's first event, or the answer to a message
    # sent to be answered at once): from then on a cut call can cancel it.
    known = trio.Event()
    saw = _client.Sent.saw

    def seen(self: _client.Sent, task: Any) -> None:
        saw(self, task)
        known.set()

    monkeypatch.setattr(_client.Sent, "saw", seen)
    async with open_server(make_kernel) as server:
        caller(workspace, {"url": f"{server.url}/api/v1/a2a/slow", "api_key_env": "HELPER_KEY"})
        ended: list[RunResult] = []
        async with trio.open_nursery() as nursery:

            async def run_caller() -> None:
                ended.append(
                    await server.kernel.run("caller", "go", run_id="local", principal="alice")
                )

            nursery.start_soon(run_caller)
            with trio.fail_after(60):
                await known.wait()
            assert await server.kernel.request_cancel("local", "the user gave up")
        [remote_id] = [r.run_id for r in await server.kernel.store().list_runs(agent_id="slow")]
        async with a2a_client(server.url, "slow", KEYS["bob"], streaming=False) as bob:
            remote = await bob.get_task(GetTaskRequest(id=remote_id))
    assert ended[0].status == "cancelled"
    assert remote.status.state == TaskState.TASK_STATE_CANCELED
