"""The official AG-UI client, ``@ag-ui/client``'s ``HttpAgent`` (TypeScript, run by node),
against a real server on 127.0.0.1: a thread of runs, a run that does not complete, cancel, a
second client attaching to a run under way (``connectAgent``), and another principal. The
client checks every stream itself (its ``verifyEvents``): a stream it rejects is a failed run.
Every event it reports is checked with the ``ag-ui-protocol`` package's types too."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import trio
from _support.http_server import KEYS, keyed_config, open_server
from agui_support import EVENT, agents, official_client, official_client_missing

from soulacy.kernel import Event, Kernel
from soulacy.testing import Workspace


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    missing = official_client_missing()
    if missing:
        pytest.skip(missing)
    workspace.write_config(keyed_config())
    agents(workspace)
    return workspace


def _of(lines: list[dict[str, Any]], kind: str, run: str | None = None) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == kind and run in (None, line.get("run"))]


def _events(lines: list[dict[str, Any]], run: str) -> list[dict[str, Any]]:
    events = [line["event"] for line in _of(lines, "event", run)]
    for event in events:
        EVENT.validate_python(event)
    return events


async def test_the_official_client_runs_a_thread_of_two_runs_with_a_tool_call(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        runs = [("oc-1", "one"), ("oc-2", "two")]
        lines = await official_client(server.url, "tooly", KEYS["alice"], "oc-thread", runs)
        history = await server.kernel.store().load_history("tooly", "oc-thread", "alice")
    assert _of(lines, "failed") == _of(lines, "rejected") == []
    assert [line["outcome"] for line in _of(lines, "finished")] == ["success", "success"]
    assert [line["result"]["reply"] for line in _of(lines, "result")] == ["done", "done"]
    assert [e["type"] for e in _events(lines, "oc-1")][-1] == "RUN_FINISHED"
    # the client's own view of the thread: each run's messages, none merged into another's
    messages = _of(lines, "messages")[0]["messages"]
    assert [(m["role"], m.get("content")) for m in messages if m["role"] != "tool"] == [
        ("user", "one"),
        ("assistant", "let me look"),
        ("assistant", "done"),
        ("user", "two"),
        ("assistant", "let me look"),
        ("assistant", "done"),
    ]
    calls = [call for m in messages for call in m.get("toolCalls", [])]
    assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
        ("oc-1:call_0_0", '{"q": "x"}'),
        ("oc-2:call_0_0", '{"q": "x"}'),
    ]
    # the thread is the server's conversation: the second run continued the first
    assert [m.content for m in history if m.role == "user"] == ["one", "two"]


async def test_the_official_client_is_told_why_a_run_did_not_complete(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        lines = await official_client(
            server.url, "short", KEYS["alice"], "oc-short", [("oc-s", "go")]
        )
    (error,) = _of(lines, "run_error")
    assert error["event"]["code"] == "max_turns"
    assert error["event"]["message"] == "run oc-s ended incomplete: max_turns"
    assert _of(lines, "finished") == []


async def _until_started(events: trio.MemoryReceiveChannel[Event], run_id: str) -> None:
    async for event in events:
        if event.type == "run.started" and event.run_id == run_id:
            return


async def test_cancel_reaches_the_official_client_and_one_attaching_to_the_run(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        trio.open_nursery() as nursery,
    ):

        async def run() -> None:
            seen["ran"] = await official_client(
                server.url, "slow", KEYS["alice"], "oc-c", [("oc-cancel", "wait")]
            )

        async def attach() -> None:  # another tab: before or after the cancel, the same
            seen["attached"] = await official_client(
                server.url, "slow", KEYS["alice"], "oc-c", [("oc-cancel", "")], "connect"
            )

        started = server.kernel.events.subscribe(math.inf)
        nursery.start_soon(run)
        await _until_started(started, "oc-cancel")
        nursery.start_soon(attach)
        answer = await alice.post("/chat/cancel", json={"run_id": "oc-cancel"})
        assert answer.json()["cancelled"] is True
    for client in ("ran", "attached"):
        lines = seen[client]
        assert _of(lines, "failed") == _of(lines, "rejected") == [], client
        assert [line["outcome"] for line in _of(lines, "finished")] == ["cancelled"], client
    assert _events(seen["attached"], "oc-cancel") == _events(seen["ran"], "oc-cancel")


async def test_the_official_client_of_another_principal_can_neither_reuse_nor_attach(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        url, alice, bob = server.url, KEYS["alice"], KEYS["bob"]
        mine = await official_client(url, "echo", alice, "t", [("oc-mine", "hi")])
        reused = await official_client(url, "echo", bob, "t", [("oc-mine", "x")], refused=True)
        attached = await official_client(
            url, "echo", bob, "t", [("oc-mine", "")], "connect", refused=True
        )
        keyless = await official_client(url, "echo", None, "t", [("oc-k", "hi")], refused=True)
    assert [line["outcome"] for line in _of(mine, "finished")] == ["success"]
    assert [line["status"] for line in _of(reused, "rejected")] == [404]
    assert [line["status"] for line in _of(attached, "rejected")] == [404]
    assert [line["status"] for line in _of(keyless, "rejected")] == [401]
    for lines in (reused, attached, keyless):
        assert _of(lines, "event") == []


async def test_a_client_that_aborts_stops_its_stream_not_the_run_and_can_attach_again(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        run = [("oc-abort", "take your time")]
        aborted = await official_client(server.url, "slow", KEYS["alice"], "oc-a", run, "abort")
        running = (await alice.get("/runs/oc-abort")).json()["running"]
        await alice.post("/chat/cancel", json={"run_id": "oc-abort"})
        again = await official_client(server.url, "slow", KEYS["alice"], "oc-a", run, "connect")
    # the events came as the run made them: its start (what reached the client with it too),
    # then the client left and, as AG-UI lets a consumer do with a truncated run, told its
    # application with a RUN_ERROR of its own
    seen = _events(aborted, "oc-abort")
    cut = [e["type"] for e in seen].index("RUN_ERROR")
    server_sent, client_made = seen[:cut], seen[cut:]
    assert [e["type"] for e in server_sent][:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert [(e["type"], e["code"]) for e in client_made] == [("RUN_ERROR", "abort")]
    assert _of(aborted, "finished") == []
    assert running is True  # leaving is not cancelling: the run is the server's
    assert [line["outcome"] for line in _of(again, "finished")] == ["cancelled"]
    assert _events(again, "oc-abort")[: len(server_sent)] == server_sent
