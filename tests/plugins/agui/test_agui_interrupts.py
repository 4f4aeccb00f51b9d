"""AG-UI interrupts: a tool call waiting for a person's approval ends the AG-UI run with the
interrupt outcome, and the client's next run answers it (``resume``) and carries the same
Soulacy run on, checked with the ``ag-ui-protocol`` package's types, the lifecycle rules, and
the official client's own interrupt handling."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import trio
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

GATED_TOOLS = '''
from pathlib import Path


def delete(path: str) -> str:
    """Delete a file (only notes that it ran)."""
    with (Path(__file__).parent / "ran.txt").open("a") as fh:
        fh.write(f"delete {path}\\n")
    return f"deleted {path}"
'''


@pytest.fixture
def served(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    agents(workspace)
    workspace.scripted_agent(
        "gated",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
        repeat=True,
    )
    (workspace.path / "agents" / "gated" / "tools.py").write_text(GATED_TOOLS)
    return workspace


def ran(workspace: Workspace) -> list[str]:
    path = workspace.path / "agents" / "gated" / "ran.txt"
    return path.read_text().splitlines() if path.exists() else []


def answer(run_id: str, interrupt_id: str, **entry: Any) -> dict[str, Any]:
    """A resume: the run ``run_id`` answering ``interrupt_id`` (approved, unless told)."""
    entry = {"interruptId": interrupt_id, "status": "resolved", **entry}
    entry.setdefault("payload", {"approved": True})
    body = run_input("t-gated", run_id, "unused")
    body["resume"] = [entry]
    return body


def deltas(events: list[Received]) -> list[tuple[str, str]]:
    return [
        (d.path, d.value["status"])
        for e in events
        if e.type == "STATE_DELTA"
        for d in e.event.delta
        if d.path.startswith("/soulacy/approvals/")
    ]


async def test_a_call_waiting_for_approval_ends_the_run_with_an_interrupt_a_resume_answers(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        _, first = await post_run(alice, "gated", run_input("t-gated", "g-1", "clean up"))
        waited = ran(served)
        _, second = await post_run(alice, "gated", answer("g-2", "g-1:c1"))
        stored = await server.kernel.store().get_run("g-1")
        again = await alice.get("/agui/runs/g-2/events")
    check_lifecycle(first)
    check_lifecycle(second, ended_before=frozenset({"g-1:c1"}))  # its call was the first run's
    # The first AG-UI run: the call, its pending approval, then the interrupt outcome.
    assert [e.type for e in first][-4:] == [
        "TOOL_CALL_END",
        "STATE_DELTA",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    [interrupt] = first[-1].event.outcome.interrupts
    assert (interrupt.id, interrupt.tool_call_id, interrupt.reason) == (
        "g-1:c1",
        "g-1:c1",
        "tool_approval",
    )
    assert interrupt.response_schema["required"] == ["approved"]
    assert waited == []  # nothing ran before the decision
    # The second: a new AG-UI run, whose parent is the first, carrying the same Soulacy run.
    started = second[0].event
    assert (started.run_id, started.parent_run_id, started.thread_id) == ("g-2", "g-1", "t-gated")
    assert deltas(first) == [("/soulacy/approvals/g-1:c1", "pending")]
    assert deltas(second) == [("/soulacy/approvals/g-1:c1", "approved")]
    [result] = [e.event for e in second if e.type == "TOOL_CALL_RESULT"]
    assert (result.tool_call_id, result.content) == ("g-1:c1", "deleted a.txt")
    assert second[-1].type == "RUN_FINISHED"
    assert second[-1].event.outcome is None  # success
    assert second[-1].event.result["reply"] == "finished"
    assert ran(served) == ["delete a.txt"]
    assert stored is not None
    assert stored.status == "completed"
    assert again.status_code == 200  # the resumed AG-UI run is resumable by its own id


async def test_an_interrupt_dismissed_or_refused_refuses_the_call(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        await post_run(alice, "gated", run_input("t-gated", "d-1", "clean up"))
        _, dismissed = await post_run(alice, "gated", answer("d-2", "d-1:c1", status="cancelled"))
    check_lifecycle(dismissed, ended_before=frozenset({"d-1:c1"}))
    assert deltas(dismissed) == [("/soulacy/approvals/d-1:c1", "denied")]
    [result] = [e.event for e in dismissed if e.type == "TOOL_CALL_RESULT"]
    assert "denied" in result.content
    assert ran(served) == []


async def test_bob_cannot_answer_alices_interrupt_and_it_still_waits_for_her(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await post_run(alice, "gated", run_input("t-gated", "b-1", "clean up"))
        refused, _ = await post_run(bob, "gated", answer("b-bob", "b-1:c1"))
        unknown, _ = await post_run(alice, "gated", answer("b-x", "b-1:nope"))
        _, hers = await post_run(alice, "gated", answer("b-2", "b-1:c1"))
        taken, _ = await post_run(alice, "gated", answer("b-3", "b-1:c1"))  # answered already
    assert refused.status_code == 404  # another principal's interrupt reads as none
    assert "resume.0.interruptId" in refused.json()["fields"]
    assert unknown.status_code == 404
    check_lifecycle(hers, ended_before=frozenset({"b-1:c1"}))
    assert hers[-1].event.result["reply"] == "finished"
    assert taken.status_code == 404
    assert ran(served) == ["delete a.txt"]


async def test_the_official_client_answers_the_interrupt_it_was_given(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    missing = official_client_missing()
    if missing:
        pytest.skip(missing)
    async with open_server(make_kernel) as server:
        runs = [("oc-g1", "clean up"), ("oc-g2", "approve")]
        lines = await official_client(
            server.url, "gated", KEYS["alice"], "oc-gated", runs, mode="approve"
        )
    assert [line for line in lines if line["kind"] in ("failed", "rejected")] == []
    outcomes = [line["outcome"] for line in lines if line["kind"] == "finished"]
    assert outcomes == ["interrupt", "success"]
    results = [line.get("result") for line in lines if line["kind"] == "result"]
    assert results[0] is None  # an interrupted run has no result
    assert results[1]["reply"] == "finished"
    [found] = [line for line in lines if line["kind"] == "messages"]
    messages = found["messages"]
    assert [(m["role"], m.get("content")) for m in messages if m["role"] != "assistant"] == [
        ("user", "clean up"),
        ("tool", "deleted a.txt"),  # the resumed run's result, after the first run's call
    ]
    assert ran(served) == ["delete a.txt"]


async def test_a_run_the_wait_suspended_is_carried_on_by_its_answer(
    served: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    # Suspended as soon as it waits: it gives back its place and ends for now; the answer
    # resumes it (a same-id retry) and carries it to its end, in the answer's AG-UI run.
    served.write_config(keyed_config("approvals:\n  suspend_after: 1ms\n"))
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        events = server.kernel.events.subscribe(math.inf)
        _, first = await post_run(alice, "gated", run_input("t-gated", "s-1", "clean up"))
        with trio.fail_after(60):
            async for event in events:
                if event.type == "run.suspended" and event.run_id == "s-1":
                    break
        _, second = await post_run(alice, "gated", answer("s-2", "s-1:c1"))
        stored = await server.kernel.store().get_run("s-1")
    assert first[-1].event.outcome.type == "interrupt"
    check_lifecycle(second, ended_before=frozenset({"s-1:c1"}))
    assert second[-1].event.result["reply"] == "finished"
    assert ran(served) == ["delete a.txt"]
    assert stored is not None
    assert (stored.status, stored.attempt) == ("completed", 2)  # resumed: a same-id retry
