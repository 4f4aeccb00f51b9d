"""A run's life as one state machine (decision 0063): every transition of the engine's table is
taken by one of the scenarios below, each with the real SQLite store, real leases and real
cancellations, and the table in docs/running.md is the one the engine checks against."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool, open_kernel
from soulacy.kernel.engine import RunStop
from soulacy.plugins.approvals import approvals_of
from soulacy.plugins.engine import _states
from soulacy.plugins.engine._states import TRANSITIONS, Life, RunState
from soulacy.testing import Workspace, throwaway_plugin

S = RunState
FAST = "leases: {ttl: 300ms, heartbeat: 50ms, cancel_poll: 50ms}\n"
ROOT = Path(__file__).resolve().parents[2]

# The trace each scenario's run goes through, from QUEUED on.
BEGUN = [S.QUEUED, S.STARTING, S.RUNNING]
WAITING = [*BEGUN, S.AWAITING_APPROVAL]
SCENARIOS: dict[str, list[RunState]] = {
    "completes": [S.QUEUED, S.STARTING, S.RUNNING, S.FINISHED],
    "cancelled while queued": [S.QUEUED, S.NOT_STORED],
    "another request's run id": [S.QUEUED, S.STARTING, S.NOT_STORED],
    "lease lost before its first turn": [S.QUEUED, S.STARTING, S.LOST],
    "cancelled mid-tool": [S.QUEUED, S.STARTING, S.RUNNING, S.FINISHED],
    "approved": [S.QUEUED, S.STARTING, S.RUNNING, S.AWAITING_APPROVAL, S.RUNNING, S.FINISHED],
    "cancelled awaiting approval": [*WAITING, S.FINISHED],
    "stopped awaiting approval": [*WAITING, S.SUSPENDED],
    "suspended after waiting": [*WAITING, S.SUSPENDED],
    "lease lost awaiting approval": [*WAITING, S.LOST],
    "shutdown mid-tool": [S.QUEUED, S.STARTING, S.RUNNING, S.INTERRUPTED],
    "lease lost mid-tool": [S.QUEUED, S.STARTING, S.RUNNING, S.LOST],
    "store refused, then answers": [S.QUEUED, S.STARTING, S.RUNNING, S.UNSTORED, S.FINISHED],
    "store refused, lease taken": [S.QUEUED, S.STARTING, S.RUNNING, S.UNSTORED, S.LOST],
    "store refused to the end": [S.QUEUED, S.STARTING, S.RUNNING, S.UNSTORED, S.INTERRUPTED],
}  # fmt: skip


def test_the_scenarios_take_every_transition_of_the_table() -> None:
    taken = {(a, b) for trace in SCENARIOS.values() for a, b in pairwise(trace)}
    assert taken == {(t.source, t.target) for t in TRANSITIONS}


def test_the_table_in_running_md_is_the_engines() -> None:
    text = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- states:begin -->\n(.*?)<!-- states:end -->", text, re.S)
    assert found, "docs/running.md has no states table (<!-- states:begin --> ... end)"
    assert found.group(1) == _states.table(), (
        "docs/running.md's table is stale: paste `python -m soulacy.plugins.engine._states`"
    )


# -- the scenarios ----------------------------------------------------------------------------


@pytest.fixture
def lives(monkeypatch: pytest.MonkeyPatch) -> list[Life]:
    """Every run's life, as the engine moves it."""
    made: list[Life] = []
    original = Life.__init__

    def init(self: Life) -> None:
        original(self)
        made.append(self)

    monkeypatch.setattr(Life, "__init__", init)
    return made


class Gate:
    """A tool that blocks until released, and says when it started."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.release = trio.Event()

    def plugin(self) -> Any:
        async def wait() -> str:
            """Waits for the test."""
            self.entered.set()
            await self.release.wait()
            return "released"

        return throwaway_plugin("gate", soulacy_tools=lambda: [Tool.from_function(wait)])


def agent(workspace: Workspace, **keys: Any) -> None:
    workspace.write_config(FAST)
    steps = [{"tool": "wait", "id": "c1"}, {"text": "done"}]
    workspace.scripted_agent("a", steps, tools=["wait"], **keys)


def take_over(workspace: Workspace) -> None:
    """Another process takes the conversation's lease over (as after a pause past it)."""
    with sqlite3.connect(workspace.path / "soulacy.db") as conn:
        now = time.time()
        changed = conn.execute(
            "UPDATE leases SET token = token + 1, owner_id = 'another-process', holder = 'R2',"
            " acquired_at = ?, renewed_at = ?, expires_at = ? WHERE key LIKE 'conversation:%'",
            (now, now, now + 60),
        ).rowcount
    assert changed == 1


def trace(lives: list[Life], index: int = -1) -> list[RunState]:
    return list(lives[index].trace)


async def first(events: trio.MemoryReceiveChannel[Event], type: str) -> Event:
    with trio.fail_after(20):
        async for event in events:
            if event.type == type:
                return event
    raise AssertionError(f"no {type} event")


async def test_completes(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    gate = Gate()
    agent(workspace)
    gate.release.set()
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    assert (await kernel.run("a", "go")).status == "completed"
    assert trace(lives) == SCENARIOS["completes"]
    await kernel.aclose()


async def test_cancelled_while_queued_and_mid_tool(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    gate = Gate()
    agent(workspace)
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    results: dict[str, Any] = {}

    async def ask(run_id: str) -> None:
        results[run_id] = await kernel.run("a", "go", session_id="s", run_id=run_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "first")
        await gate.entered.wait()
        nursery.start_soon(ask, "second")  # queued behind the first
        await trio.testing.wait_all_tasks_blocked()
        assert kernel.cancel_run("second")
        await trio.testing.wait_all_tasks_blocked()
        assert kernel.cancel_run("first")
    assert results["second"].status == results["first"].status == "cancelled"
    assert trace(lives, 0) == SCENARIOS["cancelled mid-tool"]
    assert trace(lives, 1) == SCENARIOS["cancelled while queued"]
    await kernel.aclose()


async def test_another_requests_run_id(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    gate = Gate()
    agent(workspace)
    gate.release.set()
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    await kernel.run("a", "go", session_id="s1", run_id="R")
    refused = await kernel.run("a", "go", session_id="s2", run_id="R")
    assert refused.incomplete_reason == "identity_mismatch"
    assert trace(lives) == SCENARIOS["another request's run id"]
    await kernel.aclose()


async def test_lease_lost_before_its_first_turn(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    agent(workspace)
    begun = trio.Event()
    attempts: list[int] = []

    async def strategy(run: Any) -> None:
        attempts.append(1)
        if len(attempts) == 1:  # a fresh run is claimed at once: its first attempt ends
            raise RunStop("incomplete", "no_progress")
        begun.set()  # the retry waits before its first turn
        await trio.sleep_forever()

    plugin = throwaway_plugin("slow-start", soulacy_run_strategy=lambda run: strategy)
    kernel = make_kernel(extra_plugins=[Gate().plugin(), plugin])
    async with open_kernel(kernel=kernel, services="runs"), trio.open_nursery() as nursery:
        results: list[Any] = []
        first_attempt = await kernel.run("a", "go", run_id="R", session_id="S")
        assert first_attempt.status == "incomplete"

        async def go() -> None:
            results.append(await kernel.run("a", "go", run_id="R", session_id="S"))

        nursery.start_soon(go)
        await begun.wait()
        take_over(workspace)
    assert results[0].incomplete_reason == "lease_lost"
    assert trace(lives) == SCENARIOS["lease lost before its first turn"]


async def test_lease_lost_mid_tool(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    gate = Gate()
    agent(workspace)
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    async with open_kernel(kernel=kernel, services="runs"), trio.open_nursery() as nursery:
        results: list[Any] = []

        async def go() -> None:
            results.append(await kernel.run("a", "go"))

        nursery.start_soon(go)
        await gate.entered.wait()
        take_over(workspace)
    assert results[0].incomplete_reason == "lease_lost"
    assert trace(lives) == SCENARIOS["lease lost mid-tool"]


async def test_shutdown_mid_tool(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    gate = Gate()
    agent(workspace)
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    results: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def go() -> None:
            results.append(await kernel.run("a", "go"))

        nursery.start_soon(go)
        await gate.entered.wait()
        kernel.stopping.set()  # its kernel stops: what runs is cut
        nursery.cancel_scope.cancel()
    assert trace(lives) == SCENARIOS["shutdown mid-tool"]
    await kernel.aclose()


@asynccontextmanager
async def waiting_for_approval(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> AsyncIterator[tuple[Kernel, trio.Nursery, list[Any]]]:
    agent(workspace, confirm_tools=["wait"])
    gate = Gate()
    gate.release.set()
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    events = kernel.events.subscribe(buffer=float("inf"))
    results: list[Any] = []
    async with open_kernel(kernel=kernel, services="runs"), trio.open_nursery() as nursery:

        async def go() -> None:
            results.append(await kernel.run("a", "go", run_id="R", session_id="s"))

        nursery.start_soon(go)
        await first(events, "tool.approval")
        yield kernel, nursery, results


async def test_approved(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    async with waiting_for_approval(workspace, make_kernel) as (kernel, _, results):
        await approvals_of(kernel).decide("R", "c1", approved=True, approver="ann")
    assert results[0].status == "completed"
    assert trace(lives) == SCENARIOS["approved"]


async def test_cancelled_awaiting_approval(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    async with waiting_for_approval(workspace, make_kernel) as (kernel, _, results):
        assert kernel.cancel_run("R")
    assert results[0].status == "cancelled"
    assert trace(lives) == SCENARIOS["cancelled awaiting approval"]


async def test_stopped_awaiting_approval(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    async with waiting_for_approval(workspace, make_kernel) as (_, nursery, _):
        nursery.cancel_scope.cancel()  # its caller goes away: a decision resumes it later
    assert trace(lives) == SCENARIOS["stopped awaiting approval"]


async def test_suspended_after_waiting(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    """Past ``approvals.suspend_after`` the run gives back its task, slot and lease and ends
    ``interrupted (awaiting_approval)``; its decision resumes it, here by a same-id retry."""
    agent(workspace, confirm_tools=["wait"])
    workspace.write_config(FAST + "approvals: {suspend_after: 1ms}\n")
    gate = Gate()
    gate.release.set()
    kernel = make_kernel(extra_plugins=[gate.plugin()])
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", run_id="R", session_id="s")
        assert (result.status, result.incomplete_reason) == ("interrupted", "awaiting_approval")
        assert trace(lives) == SCENARIOS["suspended after waiting"]
        assert kernel.runner().holder("R") is None  # no task, no slot
        stored = await kernel.store().get_run("R")
        assert stored is not None
        assert stored.status == "interrupted"
        decided = await approvals_of(kernel).decide("R", "c1", approved=True, approver="ann")
        assert decided is not None
        assert decided.resume
        resumed = await approvals_of(kernel).resume(decided.request)
    assert (resumed.status, resumed.reply, resumed.attempt) == ("completed", "done", 2)
    assert gate.entered.is_set()  # the approved call ran, in the resumed attempt


async def test_lease_lost_awaiting_approval(
    workspace: Workspace, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    async with waiting_for_approval(workspace, make_kernel) as (_, _, results):
        take_over(workspace)
        with trio.fail_after(20):
            while not results:  # noqa: ASYNC110 - the keeper's next renewal ends it
                await trio.sleep(0.01)
    assert results[0].incomplete_reason == "lease_lost"
    assert trace(lives) == SCENARIOS["lease lost awaiting approval"]


# -- the store refuses how it ended ------------------------------------------------------------


@pytest.fixture
def holder(workspace: Workspace) -> Iterator[sqlite3.Connection]:
    """A connection whose write transaction, opened by the agent's ``lock`` tool, keeps the
    store's writers out until the test ends it."""
    conn = sqlite3.connect(
        workspace.path / "soulacy.db", isolation_level=None, check_same_thread=False
    )
    workspace.write_config(
        "store: {busy_timeout: 100ms}\nleases: {ttl: 5s, heartbeat: 100ms, cancel_poll: 100ms}\n"
    )
    workspace.scripted_agent("a", [{"tool": "lock", "id": "c1"}, {"text": "done"}], tools=["lock"])
    try:
        yield conn
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


def locker(conn: sqlite3.Connection) -> Any:
    def lock() -> str:
        """Locks the database."""
        conn.execute("BEGIN IMMEDIATE")
        return "locked"

    return throwaway_plugin("locker", soulacy_tools=lambda: [Tool.from_function(lock)])


async def until(check: Callable[[], bool]) -> None:
    with trio.fail_after(20):
        while not check():  # noqa: ASYNC110 - the lease keeper's heartbeats do the work
            await trio.sleep(0.02)


async def test_store_refused_then_answers(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    kernel = make_kernel(extra_plugins=[locker(holder)])
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", session_id="s")
        assert result.incomplete_reason == "storage_error"
        assert lives[-1].state is S.UNSTORED
        holder.execute("ROLLBACK")
        await until(lambda: lives[-1].state is S.FINISHED)
    assert trace(lives) == SCENARIOS["store refused, then answers"]


async def test_store_refused_and_lease_taken(
    holder: sqlite3.Connection,
    make_kernel: Callable[..., Kernel],
    lives: list[Life],
    workspace: Workspace,
) -> None:
    kernel = make_kernel(extra_plugins=[locker(holder)])
    async with open_kernel(kernel=kernel, services="runs"):
        await kernel.run("a", "go", session_id="s")
        now = time.time()
        holder.execute(
            "UPDATE leases SET token = token + 1, owner_id = 'another-process',"
            " acquired_at = ?, renewed_at = ?, expires_at = ? WHERE key LIKE 'conversation:%'",
            (now, now, now + 60),
        )
        holder.execute("COMMIT")
        await until(lambda: lives[-1].state is S.LOST)
    assert trace(lives) == SCENARIOS["store refused, lease taken"]


async def test_store_refused_to_the_end(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel], lives: list[Life]
) -> None:
    kernel = make_kernel(extra_plugins=[locker(holder)])
    await kernel.run("a", "go", session_id="s")  # not open: one last attempt as it returns
    assert trace(lives) == SCENARIOS["store refused to the end"]
    await kernel.aclose()
