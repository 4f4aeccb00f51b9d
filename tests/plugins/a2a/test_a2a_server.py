"""The workspace's agents over A2A 1.0, exercised by the official ``a2a-sdk`` client against a
real server on 127.0.0.1, with the test principals' keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import KEYS, keyed_config, open_server
from a2a.client import A2ACardResolver, ClientCallContext
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError, UnsupportedOperationError
from a2a_support import VERSIONS, a2a_client, agents, collect, http, request

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

COMPLETED = TaskState.TASK_STATE_COMPLETED
CANCELED = TaskState.TASK_STATE_CANCELED
FAILED = TaskState.TASK_STATE_FAILED
WORKING = TaskState.TASK_STATE_WORKING


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    return workspace


# The SDK's client, when a stream's request is answered with an error, raises it and leaves its
# response's async generators to the garbage collector, which Trio reports as a ResourceWarning.
SDK_STREAM_ERROR_LEAK = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)


def kinds(events: list[StreamResponse]) -> list[str]:
    return [str(event.WhichOneof("payload")) for event in events]


async def started_run(events: trio.MemoryReceiveChannel[Any]) -> str:
    """The run id of the next run that starts (a task's id)."""
    with trio.fail_after(60):
        async for event in events:
            if event.type == "run.started":
                return str(event.run_id)
    raise AssertionError("no run started")


# -- cards ---------------------------------------------------------------------------------------


async def test_the_well_known_card_lists_every_usable_agent_as_a_skill_with_its_interface(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, http(KEYS["alice"]) as client:
        card = await A2ACardResolver(client, server.url).get_agent_card()
    skills = {skill.id: skill for skill in card.skills}
    assert sorted(skills) == ["echo", "short", "slow"]  # not the disabled agent
    assert skills["echo"].description == "Says hello."
    urls = [i.url for i in card.supported_interfaces]
    assert urls == [f"{server.url}/api/v1/a2a/{agent}" for agent in skills]
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0"}
    assert card.capabilities.streaming


async def test_an_agents_card_describes_it_by_its_soul_yaml(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    served.scripted_agent(
        "guide",
        [{"text": "ok"}],
        name="Guide",
        description="Shows the way.",
        a2a_skills=[{"id": "routes", "description": "plans routes", "tags": ["maps"]}],
    )
    async with open_server(make_kernel) as server, http(KEYS["bob"]) as client:
        card = await A2ACardResolver(client, f"{server.url}/api/v1/a2a/guide").get_agent_card()
    assert (card.name, card.description) == ("Guide", "Shows the way.")
    [skill] = card.skills
    assert (skill.id, skill.name, skill.description, list(skill.tags)) == (
        "routes",
        "routes",
        "plans routes",
        ["maps"],
    )
    assert card.supported_interfaces[0].url == f"{server.url}/api/v1/a2a/guide"


async def test_cards_and_calls_need_a_key(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, http(None) as client:
        root = await client.get(f"{server.url}/.well-known/agent-card.json")
        card = await client.get(f"{server.url}/api/v1/a2a/echo/.well-known/agent-card.json")
        call = await client.post(f"{server.url}/api/v1/a2a/echo", json={"jsonrpc": "2.0"})
    assert [root.status_code, card.status_code, call.status_code] == [401, 401, 401]


# -- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_message_is_a_run_answered_with_a_completed_task(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    sent: list[str] = []
    async with open_server(make_kernel) as server:
        async with a2a_client(
            server.url, "echo", KEYS["alice"], streaming=False, version=version, sent=sent
        ) as client:
            [event] = await collect(client.send_message(request("hi")))
        assert sent == [{"1.0": "SendMessage", "0.3": "message/send"}[version]]
        task = event.task
        assert task.status.state == COMPLETED
        assert task.artifacts[0].parts[0].text == "hello there"
        assert [m.parts[0].text for m in task.history] == ["hi", "hello there"]
        stored = await server.kernel.store().get_run(task.id)  # the task is the run
        assert stored is not None
        assert (stored.agent_id, stored.principal, stored.session_id, stored.status) == (
            "echo",
            "alice",
            task.context_id,
            "completed",
        )


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_message_in_a_context_continues_its_conversation(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with open_server(make_kernel) as server:
        async with a2a_client(
            server.url, "echo", KEYS["alice"], streaming=False, version=version
        ) as client:
            [first] = await collect(client.send_message(request("one")))
            context = first.task.context_id
            [second] = await collect(client.send_message(request("two", context_id=context)))
        assert second.task.context_id == context
        history = await server.kernel.store().history(context, "echo", "alice")
        assert [e.content for e in history if e.role == "user"] == ["one", "two"]


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_streamed_message_tells_the_task_its_reply_and_its_final_state(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], version=version) as client,
    ):
        events = await collect(client.send_message(request("hi")))
    assert kinds(events)[0] == "task"
    assert kinds(events)[-2:] == ["artifact_update", "status_update"]
    task, artifact, status = events[0], events[-2], events[-1]
    assert task.task.status.state == WORKING
    # The last artifact event is the whole reply, replacing the chunks streamed before it.
    assert artifact.artifact_update.artifact.parts[0].text == "hello there"
    assert artifact.artifact_update.last_chunk
    assert not artifact.artifact_update.append
    assert status.status_update.status.state == COMPLETED
    assert status.status_update.task_id == task.task.id


async def test_a_run_that_does_not_complete_fails_its_task_saying_why(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "short", KEYS["alice"], streaming=False) as client,
    ):
        [event] = await collect(client.send_message(request("go")))
    status = event.task.status
    assert status.state == FAILED
    assert f"run {event.task.id} ended incomplete" in status.message.parts[0].text


# -- cancel and reconnect ------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancelling_a_task_cancels_its_run_and_ends_its_stream_canceled(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with open_server(make_kernel) as server:
        started = server.kernel.events.subscribe()
        streamed: list[StreamResponse] = []
        async with (
            a2a_client(server.url, "slow", KEYS["alice"], version=version) as streaming,
            a2a_client(
                server.url, "slow", KEYS["alice"], streaming=False, version=version
            ) as client,
            trio.open_nursery() as nursery,
        ):

            async def stream() -> None:
                streamed.extend(await collect(streaming.send_message(request("take a while"))))

            nursery.start_soon(stream)
            task_id = await started_run(started)
            cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
            assert cancelled.status.state == CANCELED
            with pytest.raises(TaskNotCancelableError):  # a second time: it has ended
                await client.cancel_task(CancelTaskRequest(id=task_id))
        assert kinds(streamed) == ["task", "status_update"]
        assert streamed[-1].status_update.status.state == CANCELED
        stored = await server.kernel.store().get_run(task_id)
        assert stored is not None
        assert stored.status == "cancelled"


@SDK_STREAM_ERROR_LEAK
@pytest.mark.parametrize("version", VERSIONS)
async def test_reconnecting_with_last_event_id_gives_the_events_missed(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False, version=version) as client,
        a2a_client(server.url, "slow", KEYS["alice"], version=version) as streaming,
    ):
        [event] = await collect(
            client.send_message(request("take a while", return_immediately=True))
        )
        task_id = event.task.id
        assert event.task.status.state == WORKING  # answered at once, its run goes on
        await client.cancel_task(CancelTaskRequest(id=task_id))
        # The first event (the task) was seen: the stream resumes after it.
        seen_first = ClientCallContext(service_parameters={"Last-Event-ID": "1"})
        missed = await collect(
            streaming.subscribe(SubscribeToTaskRequest(id=task_id), context=seen_first)
        )
        everything = ClientCallContext(service_parameters={"Last-Event-ID": "0"})
        replayed = await collect(
            streaming.subscribe(SubscribeToTaskRequest(id=task_id), context=everything)
        )
        with pytest.raises(UnsupportedOperationError, match="terminal state"):
            await collect(streaming.subscribe(SubscribeToTaskRequest(id=task_id)))
    assert kinds(missed) == ["status_update"]
    assert missed[0].status_update.status.state == CANCELED
    assert kinds(replayed) == ["task", "status_update"]


async def test_a_task_is_read_from_the_store_after_a_restart(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], streaming=False) as client,
    ):
        [event] = await collect(client.send_message(request("hi")))
    async with open_server(make_kernel) as server:
        async with a2a_client(server.url, "echo", KEYS["alice"], streaming=False) as client:
            task = await client.get_task(GetTaskRequest(id=event.task.id))
        async with a2a_client(server.url, "echo", KEYS["bob"], streaming=False) as client:
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=event.task.id))
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == "hello there"
    assert [m.parts[0].text for m in task.history] == ["hi", "hello there"]


# -- principals ----------------------------------------------------------------------------


@SDK_STREAM_ERROR_LEAK
@pytest.mark.parametrize("version", VERSIONS)
async def test_bob_can_neither_read_nor_cancel_nor_follow_alices_task(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False, version=version) as alice,
        a2a_client(server.url, "slow", KEYS["bob"], version=version) as bob,
    ):
        [event] = await collect(alice.send_message(request("mine", return_immediately=True)))
        task_id = event.task.id
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await bob.cancel_task(CancelTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await collect(bob.subscribe(SubscribeToTaskRequest(id=task_id)))
        everything = ClientCallContext(service_parameters={"Last-Event-ID": "0"})
        with pytest.raises(TaskNotFoundError):
            await collect(bob.subscribe(SubscribeToTaskRequest(id=task_id), context=everything))
        still = await alice.get_task(GetTaskRequest(id=task_id))  # untouched by bob
        assert still.status.state == WORKING
        await alice.cancel_task(CancelTaskRequest(id=task_id))
        # A task is reached at its own agent's endpoint only.
        async with a2a_client(
            server.url, "echo", KEYS["alice"], streaming=False, version=version
        ) as elsewhere:
            with pytest.raises(TaskNotFoundError):
                await elsewhere.get_task(GetTaskRequest(id=task_id))


# -- bad input -----------------------------------------------------------------------------


def rpc(method: str, params: Any = None, **extra: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, **extra}
    if params is not None:
        body["params"] = params
    return body


TEXT = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
BAD_CALLS = [
    ({"jsonrpc": "1.0", "id": 7, "method": "GetTask"}, -32600, "jsonrpc"),
    ([rpc("GetTask", {"id": "x"})], -32600, "batches"),
    (rpc("tasks/list", {}), -32601, "tasks/list"),
    (rpc("SendMessage"), -32602, "params"),
    (rpc("SendMessage", {"message": "hi"}), -32602, "message"),
    (rpc("SendMessage", {"message": {"parts": []}}), -32602, "message.parts"),
    (
        rpc("SendMessage", {"message": {"parts": [{"url": "https://example.com/a.png"}]}}),
        -32005,
        "message.parts[0]",
    ),
    (
        rpc("SendMessage", {**TEXT, "configuration": {"returnImmediately": "yes"}}),
        -32602,
        "configuration.returnImmediately",
    ),
    (
        rpc("SendMessage", {"message": {**TEXT["message"], "contextId": "a/b"}}),
        -32602,
        "message.contextId",
    ),
    (rpc("GetTask", {}), -32602, "id"),
    (rpc("GetTask", {"id": "nope"}), -32001, "nope"),
    (rpc("GetTask", {"id": "x", "historyLength": -1}), -32602, "historyLength"),
    (rpc("CreateTaskPushNotificationConfig", {}), -32003, "push"),
    (rpc("tasks/pushNotificationConfig/set", {}), -32003, "push"),
    (
        rpc("message/send", {"message": {"parts": [{"kind": "file", "file": {"uri": "a"}}]}}),
        -32005,
        "message.parts[0]",
    ),
    (rpc("tasks/get", {}), -32602, "id"),
    (rpc("ListTasks", {"pageSize": 0}), -32602, "pageSize"),
    (rpc("ListTasks", {"pageSize": 101}), -32602, "pageSize"),
    (rpc("ListTasks", {"pageToken": "not a token"}), -32602, "pageToken"),
    (rpc("ListTasks", {"status": "TASK_STATE_DREAMING"}), -32602, "status"),
    (rpc("ListTasks", {"statusTimestampAfter": "yesterday"}), -32602, "statusTimestampAfter"),
    (rpc("ListTasks", {"includeArtifacts": "yes"}), -32602, "includeArtifacts"),
    (rpc("ListTasks", {"contextId": "a/b"}), -32602, "contextId"),
    (rpc("GetExtendedAgentCard", {}), -32004, "GetExtendedAgentCard"),
]


@pytest.mark.parametrize(("body", "code", "named"), BAD_CALLS)
async def test_bad_input_is_a_json_rpc_error_naming_the_field(
    served: Workspace,
    make_kernel: Callable[..., Kernel],
    body: Any,
    code: int,
    named: str,
) -> None:
    async with open_server(make_kernel) as server, http(KEYS["alice"]) as client:
        answer = await client.post(f"{server.url}/api/v1/a2a/echo", json=body)
    assert answer.status_code == 200
    error = answer.json()["error"]
    assert error["code"] == code
    assert named in error["message"]


async def test_an_unknown_agent_version_or_body_is_a_4xx(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, http(KEYS["alice"]) as client:
        unknown = await client.post(f"{server.url}/api/v1/a2a/off", json=rpc("GetTask", {}))
        card = await client.get(f"{server.url}/api/v1/a2a/nobody/.well-known/agent-card.json")
        not_json = await client.post(f"{server.url}/api/v1/a2a/echo", content=b"{")
        old = await client.post(
            f"{server.url}/api/v1/a2a/echo",
            json=rpc("GetTask", {"id": "x"}),
            headers={"A2A-Version": "0.3"},
        )
        new = await client.post(
            f"{server.url}/api/v1/a2a/echo",
            json=rpc("tasks/get", {"id": "x"}),
            headers={"A2A-Version": "1.0"},
        )
    assert unknown.status_code == card.status_code == 404
    assert "no agent 'off'" in unknown.json()["error"]
    assert 400 <= not_json.status_code < 500
    assert old.json()["error"]["code"] == new.json()["error"]["code"] == -32009
    assert "a method of A2A 1.0" in old.json()["error"]["message"]


def test_the_sdk_is_the_official_one() -> None:
    from importlib.metadata import version

    assert version("a2a-sdk").startswith("1.")
    assert isinstance(httpx.__version__, str)


async def test_every_principal_gets_the_same_cards_agents_are_the_workspaces(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        cards = []
        for who in ("alice", "bob"):
            async with http(KEYS[who]) as client:
                root = await client.get(f"{server.url}/.well-known/agent-card.json")
                one = await client.get(f"{server.url}/api/v1/a2a/echo/.well-known/agent-card.json")
                cards.append((root.json(), one.json()))
    assert cards[0] == cards[1]


ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x" * 300, [], [1], {}, {"a": 1}]


async def test_no_value_of_any_field_is_answered_with_a_server_error(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Each field of each method, and the envelope's, given values of every JSON type."""
    message = TEXT["message"]
    shapes: list[Callable[[Any], Any]] = [
        lambda v: v,
        lambda v: {"jsonrpc": "2.0", "id": v, "method": "GetTask", "params": {"id": "x"}},
        lambda v: {"jsonrpc": "2.0", "id": 1, "method": v, "params": {}},
        lambda v: rpc("GetTask", v),
        lambda v: rpc("GetTask", {"id": v, "historyLength": v}),
        lambda v: rpc("CancelTask", {"id": v}),
        lambda v: rpc("SubscribeToTask", {"id": v}),
        lambda v: rpc("SendMessage", {"message": v}),
        lambda v: rpc("SendMessage", {"message": {**message, "parts": v}}),
        lambda v: rpc("SendMessage", {"message": {**message, "parts": [v]}}),
        lambda v: rpc("SendMessage", {"message": {**message, "parts": [{"text": v}]}}),
        lambda v: rpc("SendMessage", {"message": {**message, "contextId": v}}),
        lambda v: rpc("SendMessage", {"message": {**message, "taskId": v}}),
        lambda v: rpc("SendMessage", {**TEXT, "configuration": v}),
        lambda v: rpc("SendMessage", {**TEXT, "configuration": {"acceptedOutputModes": v}}),
        lambda v: rpc("SendMessage", {**TEXT, "configuration": {"historyLength": v}}),
        lambda v: rpc("message/send", {"message": {"parts": [{"kind": v, "text": "hi"}]}}),
        lambda v: rpc("message/send", {**TEXT, "configuration": {"blocking": v}}),
        lambda v: rpc("tasks/resubscribe", v),
        lambda v: rpc("ListTasks", v),
        lambda v: rpc("ListTasks", {"contextId": v, "status": v, "pageSize": v}),
        lambda v: rpc("ListTasks", {"pageToken": v, "historyLength": v}),
        lambda v: rpc("ListTasks", {"statusTimestampAfter": v, "includeArtifacts": v}),
    ]
    statuses = set()
    async with open_server(make_kernel) as server, http(KEYS["alice"]) as client:
        for shape in shapes:
            for value in ODD_VALUES:
                answer = await client.post(f"{server.url}/api/v1/a2a/echo", json=shape(value))
                statuses.add(answer.status_code)
                assert answer.status_code < 500, (shape(value), answer.text)
    assert statuses <= {200, 400, 413, 415, 422}


async def test_history_length_keeps_the_last_messages_of_a_task(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], streaming=False) as client,
    ):
        [event] = await collect(client.send_message(request("hi")))
        task_id = event.task.id
        last = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        none = await client.get_task(GetTaskRequest(id=task_id, history_length=0))
    assert [m.parts[0].text for m in last.history] == ["hello there"]
    assert list(none.history) == []


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_stream_delivers_each_event_as_it_happens(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    """The slow agent's model takes 30 s: the task's first event arrives while its run goes on
    (the client cancels it from there), not once the run has ended."""
    events: list[StreamResponse] = []
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], version=version) as streaming,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False, version=version) as other,
    ):
        with trio.fail_after(20):
            async for event in streaming.send_message(request("take a while")):
                events.append(event)
                if len(events) == 1:  # live: the run has not ended
                    assert event.task.status.state == WORKING
                    await other.cancel_task(CancelTaskRequest(id=event.task.id))
    assert kinds(events)[0] == "task"
    assert events[-1].status_update.status.state == CANCELED
