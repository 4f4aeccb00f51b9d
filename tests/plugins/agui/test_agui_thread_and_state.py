"""What an AG-UI client is told of its thread and of the run's progress: a MESSAGES_SNAPSHOT of
the thread so far (the principal's own), and STATE_DELTA patches as the progress changes, each
event checked with the ``ag-ui-protocol`` package's types, the patches applied by the official
client's own JSON Patch code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _support.http_server import KEYS, keyed_config, open_server
from agui_support import (
    Received,
    agents,
    check_lifecycle,
    official_client,
    official_client_missing,
    post_run,
    run_input,
)

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    return workspace


def of_type(events: list[Received], kind: str) -> list[Any]:
    return [e.event for e in events if e.type == kind]


def shown(messages: list[Any]) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in messages]


# -- MESSAGES_SNAPSHOT ---------------------------------------------------------------------


async def test_a_run_on_a_thread_with_history_first_tells_the_thread_so_far(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, first = await post_run(alice, "tooly", run_input("t-thread", "r-1", "one"))
        _, second = await post_run(alice, "tooly", run_input("t-thread", "r-2", "two"))
    check_lifecycle(second)
    assert of_type(first, "MESSAGES_SNAPSHOT") == []  # a new thread: the client has it all
    assert [e.type for e in second][:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    [snapshot] = of_type(second, "MESSAGES_SNAPSHOT")
    messages = snapshot.messages
    assert shown(messages) == [
        ("user", "one"),
        ("assistant", "let me look"),
        ("tool", "error: unknown tool 'lookup' (available: none)"),
        ("assistant", "done"),
        ("user", "two"),  # the run's own input, last
    ]
    call = messages[1].tool_calls[0]
    # The ids the first run's stream gave its tool call, and its result's tie to it.
    assert (call.id, call.function.name, call.function.arguments) == (
        "r-1:call_0_0",
        "lookup",
        '{"q": "x"}',
    )
    assert messages[2].tool_call_id == "r-1:call_0_0"
    assert messages[-1].id == "r-2:input"
    assert len({m.id for m in messages}) == len(messages)


async def test_bob_is_told_none_of_alices_thread_only_his_own(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await post_run(alice, "echo", run_input("shared", "a-1", "alice's secret"))
        _, bobs_first = await post_run(bob, "echo", run_input("shared", "b-1", "bob here"))
        _, bobs_second = await post_run(bob, "echo", run_input("shared", "b-2", "bob again"))
        _, alices_second = await post_run(alice, "echo", run_input("shared", "a-2", "me again"))
    # The same threadId is two conversations: bob's first run has no history to be told.
    assert of_type(bobs_first, "MESSAGES_SNAPSHOT") == []
    [his] = of_type(bobs_second, "MESSAGES_SNAPSHOT")
    [hers] = of_type(alices_second, "MESSAGES_SNAPSHOT")
    assert shown(his.messages) == [
        ("user", "bob here"),
        ("assistant", "hello there"),
        ("user", "bob again"),
    ]
    assert shown(hers.messages) == [
        ("user", "alice's secret"),
        ("assistant", "hello there"),
        ("user", "me again"),
    ]


# -- STATE_DELTA ---------------------------------------------------------------------------


async def test_the_official_client_applies_each_state_delta_as_the_run_progresses(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    missing = official_client_missing()
    if missing:
        pytest.skip(missing)
    async with open_server(make_kernel) as server:
        lines = await official_client(
            server.url, "tooly", KEYS["alice"], "t-state", [("s-1", "one"), ("s-2", "two")]
        )
    assert [line for line in lines if line["kind"] in ("failed", "rejected")] == []
    deltas = [
        line["event"]["delta"]
        for line in lines
        if line["kind"] == "event" and line["event"]["type"] == "STATE_DELTA"
    ]
    assert deltas[:3] == [
        [{"op": "replace", "path": "/soulacy/modelCalls", "value": 1}],
        [{"op": "replace", "path": "/soulacy/toolCalls", "value": 1}],
        [{"op": "replace", "path": "/soulacy/modelCalls", "value": 2}],
    ]
    # The client's state after each change (its own patching; a patch that did not apply
    # would be a warning on its stderr, which official_client refuses).
    progress = [
        (line["state"]["soulacy"]["modelCalls"], line["state"]["soulacy"]["toolCalls"])
        for line in lines
        if line["kind"] == "state" and line["run"] == "s-1"
    ]
    assert progress == [(0, 0), (1, 0), (1, 1), (2, 1), (2, 1)]
    final = [line["state"] for line in lines if line["kind"] == "state" and line["run"] == "s-1"]
    assert final[-1]["soulacy"]["status"] == "completed"
