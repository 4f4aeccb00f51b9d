"""A2A conversations, streamed replies and task lists, exercised by the official ``a2a-sdk``
client against a real Soulacy server on 127.0.0.1, with the test principals' keys: a
``contextId`` continues its principal's conversation only, a reply streams as chunks of its
artifact, and ``ListTasks`` lists the caller's own tasks."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from _support.http_server import KEYS, keyed_config, open_server
from a2a.client import ClientCallContext
from a2a.server.tasks.task_manager import append_artifact_to_task
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from a2a_support import VERSIONS, a2a_client, agents, collect, request
from google.protobuf.timestamp_pb2 import Timestamp

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    # A model that writes a little, calls a tool, then replies.
    workspace.scripted_agent(
        "thinker",
        [
            {"text": "let me look", "tool": "missing", "arguments": {}, "id": "look"},
            {"text": "found it here"},
        ],
        repeat=True,
    )
    return workspace


def aggregated(events: list[StreamResponse]) -> Task:
    """The task as the SDK's own rules build it from a stream: its first event, then each
    artifact update applied by ``append_artifact_to_task``, each status update taken."""
    task = Task()
    task.CopyFrom(events[0].task)
    for event in events[1:]:
        if event.HasField("artifact_update"):
            append_artifact_to_task(task, event.artifact_update)
        elif event.HasField("status_update"):
            task.status.CopyFrom(event.status_update.status)
    return task


def chunks(events: list[StreamResponse]) -> list[tuple[str, bool, bool]]:
    """Each artifact update: its text, whether it appends, whether it is the last chunk."""
    return [
        (
            "".join(p.text for p in e.artifact_update.artifact.parts),
            e.artifact_update.append,
            e.artifact_update.last_chunk,
        )
        for e in events
        if e.HasField("artifact_update")
    ]


# -- text deltas ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_streamed_reply_comes_in_chunks_as_the_model_writes_it(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], version=version) as client,
    ):
        events = await collect(client.send_message(request("hi")))
    # The scripted model writes "hello there" in two pieces: each is a chunk as it comes, the
    # first creating the reply artifact and the next appended; then the whole reply, last.
    assert chunks(events) == [
        ("hello ", False, False),
        ("there", True, False),
        ("hello there", False, True),
    ]
    task = aggregated(events)
    assert task.status.state == COMPLETED
    assert [(a.name, [p.text for p in a.parts]) for a in task.artifacts] == [
        ("reply", ["hello there"])
    ]


async def test_text_written_before_a_tool_call_is_replaced_by_the_reply(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "thinker", KEYS["alice"]) as client,
    ):
        events = await collect(client.send_message(request("look")))
        [streamed] = [e for e in events if e.HasField("task")]
        stored = await client.get_task(GetTaskRequest(id=streamed.task.id))
    pieces = chunks(events)
    # The second turn's first chunk begins the artifact anew (append: false).
    assert ("found ", False, False) in pieces
    assert pieces[-1] == ("found it here", False, True)
    task = aggregated(events)
    assert [p.text for p in task.artifacts[0].parts] == ["found it here"]
    assert [p.text for p in stored.artifacts[0].parts] == ["found it here"]


# -- contexts: a principal's conversations -------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_bob_cannot_continue_alices_context(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with open_server(make_kernel) as server:
        async with (
            a2a_client(
                server.url, "echo", KEYS["alice"], streaming=False, version=version
            ) as alice,
            a2a_client(server.url, "echo", KEYS["bob"], streaming=False, version=version) as bob,
        ):
            [first] = await collect(alice.send_message(request("alice one")))
            context = first.task.context_id
            [intruder] = await collect(bob.send_message(request("bob two", context_id=context)))
            [again] = await collect(alice.send_message(request("alice three", context_id=context)))
        store = server.kernel.store()
        alices = await store.history(context, "echo", "alice")
        bobs = await store.history(context, "echo", "bob")
    # The same contextId is two conversations: bob's message is not in alice's, nor hers in his.
    assert [e.content for e in alices if e.role == "user"] == ["alice one", "alice three"]
    assert [e.content for e in bobs if e.role == "user"] == ["bob two"]
    assert again.task.context_id == intruder.task.context_id == context


# -- ListTasks -----------------------------------------------------------------------------


async def test_list_tasks_lists_the_callers_own_tasks_newest_first_a_page_at_a_time(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], streaming=False) as alice,
        a2a_client(server.url, "echo", KEYS["bob"], streaming=False) as bob,
    ):
        [one] = await collect(alice.send_message(request("one")))
        context = one.task.context_id
        [two] = await collect(alice.send_message(request("two", context_id=context)))
        [three] = await collect(alice.send_message(request("three")))
        [bobs] = await collect(bob.send_message(request("bob's", context_id=context)))

        everything = await alice.list_tasks(ListTasksRequest())
        first = await alice.list_tasks(ListTasksRequest(page_size=2))
        rest = await alice.list_tasks(
            ListTasksRequest(page_size=2, page_token=first.next_page_token)
        )
        in_context = await alice.list_tasks(ListTasksRequest(context_id=context))
        working = await alice.list_tasks(ListTasksRequest(status=WORKING))
        done = await alice.list_tasks(
            ListTasksRequest(status=COMPLETED, include_artifacts=True, history_length=1)
        )
        later = Timestamp()
        later.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
        none_later = await alice.list_tasks(ListTasksRequest(status_timestamp_after=later))
        bob_sees = await bob.list_tasks(ListTasksRequest(context_id=context))

    newest_first = [three.task.id, two.task.id, one.task.id]
    assert [t.id for t in everything.tasks] == newest_first
    assert (everything.total_size, everything.page_size, everything.next_page_token) == (3, 50, "")
    assert [t.id for t in first.tasks] == newest_first[:2]
    assert first.next_page_token
    assert [t.id for t in rest.tasks] == newest_first[2:]
    assert rest.next_page_token == ""
    assert [t.id for t in in_context.tasks] == [two.task.id, one.task.id]
    assert list(working.tasks) == []
    assert [t.artifacts[0].parts[0].text for t in done.tasks] == ["hello there"] * 3
    assert [[m.parts[0].text for m in t.history] for t in done.tasks] == [["hello there"]] * 3
    assert all(not t.artifacts for t in everything.tasks)  # artifacts only when asked for
    assert list(none_later.tasks) == []
    # Bob's list is his own, even in the context alice's tasks share.
    assert [t.id for t in bob_sees.tasks] == [bobs.task.id]


async def test_a_task_still_working_is_listed_working_and_bob_cannot_see_it(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "slow", KEYS["alice"], streaming=False) as alice,
        a2a_client(server.url, "slow", KEYS["bob"], streaming=False) as bob,
    ):
        [event] = await collect(alice.send_message(request("wait", return_immediately=True)))
        listed = await alice.list_tasks(ListTasksRequest(status=WORKING))
        hidden = await bob.list_tasks(ListTasksRequest())
        with pytest.raises(TaskNotFoundError):
            await bob.get_task(GetTaskRequest(id=event.task.id))
        await alice.cancel_task(CancelTaskRequest(id=event.task.id))
        # Listed at the task's own agent's endpoint only.
        async with a2a_client(server.url, "echo", KEYS["alice"], streaming=False) as echo:
            elsewhere = await echo.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [event.task.id]
    assert (list(hidden.tasks), hidden.total_size) == ([], 0)
    assert list(elsewhere.tasks) == []


@pytest.mark.parametrize("version", VERSIONS)
async def test_reconnecting_mid_reply_gives_the_chunks_missed_and_the_whole_reply(
    served: Workspace, make_kernel: Callable[..., Kernel], version: str
) -> None:
    async with (
        open_server(make_kernel) as server,
        a2a_client(server.url, "echo", KEYS["alice"], version=version) as client,
    ):
        streamed = await collect(client.send_message(request("hi")))
        task_id = streamed[0].task.id
        # The client saw the task and the first chunk, then its connection dropped.
        seen_two = ClientCallContext(service_parameters={"Last-Event-ID": "2"})
        missed = await collect(
            client.subscribe(SubscribeToTaskRequest(id=task_id), context=seen_two)
        )
    assert chunks(missed) == [("there", True, False), ("hello there", False, True)]
    assert aggregated(streamed[:2] + missed) == aggregated(streamed)
    assert aggregated(streamed).artifacts[0].parts[0].text == "hello there"
