"""A2A push notifications, set and read by the official ``a2a-sdk`` client against a real server
on 127.0.0.1, delivered to a receiver of the test's own: only to URLs under the operator's
``a2a.push_urls``, only for the caller's own tasks, each status update and the whole reply."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from _support.http_server import KEYS, keyed_config, open_server
from _support.openai_server import serve_asgi
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from a2a_support import a2a_client, agents, collect, http, request
from google.protobuf.json_format import ParseDict

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

# A delivery still under way when the test's server stops is cut: httpx leaves its request's body
# generator to the garbage collector, which Trio reports as a ResourceWarning (encode/httpx#3686).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class Receiver:
    """An HTTP endpoint that keeps what is POSTed to it: (path, headers, the StreamResponse)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], StreamResponse]] = []
        self._changed = trio.Event()
        self.url = ""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        event = ParseDict(json.loads(body), StreamResponse())
        self.received.append((scope["path"], headers, event))
        self._changed.set()
        self._changed = trio.Event()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def wait_for(self, done: Callable[[list[StreamResponse]], bool]) -> None:
        with trio.fail_after(60):
            while not done([event for _, _, event in self.received]):
                await self._changed.wait()


@asynccontextmanager
async def receiving(workspace: Workspace) -> AsyncIterator[Receiver]:
    """A receiver on 127.0.0.1, and the workspace's config allowing ``…/hooks`` there."""
    receiver = Receiver()
    async with trio.open_nursery() as nursery:
        bound, stop = await serve_asgi(nursery, receiver)
        receiver.url = f"{bound}/hooks"
        workspace.write_config(keyed_config(f"a2a:\n  push_urls: ['{receiver.url}']\n"))
        agents(workspace)
        yield receiver
        stop.set()


def states(events: list[StreamResponse]) -> list[int]:
    return [e.status_update.status.state for e in events if e.HasField("status_update")]


async def test_a_tasks_updates_are_pushed_to_the_url_its_client_names(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        receiving(workspace) as receiver,
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False) as alice,
    ):
        [event] = await collect(alice.send_message(request("wait", return_immediately=True)))
        task_id = event.task.id
        wanted = TaskPushNotificationConfig(
            task_id=task_id,
            url=f"{receiver.url}/alice",
            token="alices-token",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="hook-secret"),
        )
        created = await alice.create_task_push_notification_config(wanted)
        asked = GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
        read = await alice.get_task_push_notification_config(asked)
        listed = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        await alice.cancel_task(CancelTaskRequest(id=task_id))
        await receiver.wait_for(lambda got: TaskState.TASK_STATE_CANCELED in states(got))
    assert (created.task_id, created.url, created.token) == (task_id, wanted.url, "alices-token")
    assert read == created
    assert [c.id for c in listed.configs] == [created.id]
    [(path, headers, pushed)] = receiver.received
    assert path == "/hooks/alice"
    assert headers["x-a2a-notification-token"] == "alices-token"
    assert headers["authorization"] == "Bearer hook-secret"
    assert pushed.status_update.task_id == task_id


async def test_a_message_naming_a_url_has_its_status_and_whole_reply_pushed_not_its_chunks(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        receiving(workspace) as receiver,
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"]) as alice,
    ):
        config = TaskPushNotificationConfig(url=f"{receiver.url}/alice")
        sent = request("hi")
        sent.configuration.task_push_notification_config.CopyFrom(config)
        streamed = await collect(alice.send_message(sent))
        await receiver.wait_for(lambda got: TaskState.TASK_STATE_COMPLETED in states(got))
    chunks = [e for e in streamed if e.HasField("artifact_update")]
    assert len(chunks) == 3  # two pieces as written, then the whole reply
    pushed = [event for _, _, event in receiver.received]
    assert [e.WhichOneof("payload") for e in pushed] == ["artifact_update", "status_update"]
    assert pushed[0].artifact_update.artifact.parts[0].text == "hello there"
    assert pushed[0].artifact_update.last_chunk


async def test_bob_can_neither_add_nor_read_nor_list_nor_delete_alices_push_configs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        receiving(workspace) as receiver,
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False) as alice,
        a2a_client(server.url, "slow", KEYS["bob"], streaming=False) as bob,
    ):
        [event] = await collect(alice.send_message(request("wait", return_immediately=True)))
        task_id = event.task.id
        mine = TaskPushNotificationConfig(task_id=task_id, url=f"{receiver.url}/alice")
        created = await alice.create_task_push_notification_config(mine)
        theirs = TaskPushNotificationConfig(task_id=task_id, url=f"{receiver.url}/bob")
        asked = GetTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
        listing = ListTaskPushNotificationConfigsRequest(task_id=task_id)
        deleting = DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
        with pytest.raises(TaskNotFoundError):
            await bob.create_task_push_notification_config(theirs)
        with pytest.raises(TaskNotFoundError):
            await bob.get_task_push_notification_config(asked)
        with pytest.raises(TaskNotFoundError):
            await bob.list_task_push_notification_configs(listing)
        with pytest.raises(TaskNotFoundError):
            await bob.delete_task_push_notification_config(deleting)
        # Alice's config is untouched, and she can delete it: nothing is pushed after that.
        listed = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        await alice.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=created.id)
        )
        await alice.cancel_task(CancelTaskRequest(id=task_id))
    assert [c.id for c in listed.configs] == [created.id]
    assert receiver.received == []


async def test_a_url_outside_push_urls_is_refused_naming_the_field(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        receiving(workspace) as receiver,
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False) as alice,
    ):
        [event] = await collect(alice.send_message(request("wait", return_immediately=True)))
        task_id = event.task.id
        elsewhere = [
            "http://169.254.169.254/latest/meta-data",  # another host
            receiver.url.replace("/hooks", "/hooksmith"),  # not below the allowed path
            receiver.url.replace("http://", "http://user@"),  # a user name
        ]
        for url in elsewhere:
            config = TaskPushNotificationConfig(task_id=task_id, url=url)
            with pytest.raises(InvalidParamsError, match="url"):
                await alice.create_task_push_notification_config(config)
        await alice.cancel_task(CancelTaskRequest(id=task_id))
        async with http(KEYS["alice"]) as client:
            card = await client.get(f"{server.url}/api/v1/a2a/slow/.well-known/agent-card.json")
    assert card.json()["capabilities"]["pushNotifications"] is True
    assert receiver.received == []


ODD_VALUES: list[Any] = [None, 0, -1, 1.5, True, "", "x" * 300, [], [1], {}, {"a": 1}]


async def test_no_value_of_any_push_field_is_answered_with_a_server_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        receiving(workspace) as receiver,
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False) as alice,
        http(KEYS["alice"]) as client,
    ):
        [event] = await collect(alice.send_message(request("wait", return_immediately=True)))
        task = event.task.id
        url = f"{receiver.url}/alice"
        shapes: list[Callable[[Any], dict[str, Any]]] = [
            lambda v: {"taskId": v, "url": url},
            lambda v: {"taskId": task, "url": v},
            lambda v: {"taskId": task, "url": url, "id": v, "token": v},
            lambda v: {"taskId": task, "url": url, "authentication": v},
            lambda v: {"taskId": task, "url": url, "authentication": {"scheme": v}},
            lambda v: {"taskId": task, "url": url, "authentication": {"credentials": v}},
        ]
        methods = ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig"]
        methods += ["ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]
        for method in methods:
            for shape in shapes:
                for value in ODD_VALUES:
                    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": shape(value)}
                    answer = await client.post(f"{server.url}/api/v1/a2a/slow", json=body)
                    assert answer.status_code == 200, (body, answer.text)
                    assert "result" in answer.json() or answer.json()["error"]["code"] > -32603
        await alice.cancel_task(CancelTaskRequest(id=task))


def test_an_allowed_url_with_dot_segments_is_refused() -> None:
    """``/a2a/../admin`` starts with the allowed path as written, but leaves it once resolved
    (percent-encoded too); a plain path below the allowed one is accepted."""
    from soulacy.plugins.a2a._push import url_allowed

    allowed = ["https://hooks.example.com/a2a"]
    assert url_allowed("https://hooks.example.com/a2a/alice", allowed)
    assert not url_allowed("https://hooks.example.com/a2a/../admin", allowed)
    assert not url_allowed("https://hooks.example.com/a2a/%2e%2e/admin", allowed)
    assert not url_allowed("https://hooks.example.com/a2a/./x", allowed)
