"""A run whose outcome the store could not take: its process keeps the outcome and the run's
lease, and writes it once the store answers again (docs/running.md#after-a-crash)."""

from __future__ import annotations

import sqlite3
import sys
import time
import types
from collections.abc import Callable, Iterator

import pytest
import trio

from soulacy.kernel import Kernel, open_kernel
from soulacy.kernel.store import RunRecord
from soulacy.testing import Workspace

# The lease lives 5 s but is renewed every 100 ms: an outcome written back within a second or
# two came from the renewals, not from the lease expiring.
CONFIG = "store: {busy_timeout: 100ms}\nleases: {ttl: 5s, heartbeat: 100ms, cancel_poll: 100ms}\n"
WAIT = 3.0  # seconds: the bound of every wait below (a few dozen heartbeats)


@pytest.fixture
def holder(workspace: Workspace) -> Iterator[sqlite3.Connection]:
    """Another connection to the workspace's database: the agent's ``lock`` tool opens a write
    transaction on it (``BEGIN IMMEDIATE``), which keeps the store's writers out until the test
    ends it."""
    conn = sqlite3.connect(
        workspace.path / "soulacy.db", isolation_level=None, check_same_thread=False
    )
    name = f"_soulacy_lock_{id(conn)}"
    module = types.ModuleType(name)
    module.conn = conn  # type: ignore[attr-defined]
    sys.modules[name] = module
    (workspace.path / "agents" / "a").mkdir(parents=True)
    (workspace.path / "agents" / "a" / "t.py").write_text(
        f"import {name}\n"
        "def lock() -> str:\n"
        f"    {name}.conn.execute('BEGIN IMMEDIATE')\n"
        "    return 'locked'\n"
    )
    workspace.write_config(CONFIG)
    workspace.scripted_agent(
        "a", [{"tool": "lock", "id": "c1"}, {"text": "done"}], tools=["t.py:lock"]
    )
    try:
        yield conn
    finally:
        del sys.modules[name]
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        conn.close()


async def _read(kernel: Kernel, run_id: str) -> RunRecord:
    run = await kernel.store().get_run(run_id)
    assert run is not None
    return run


async def _poll(kernel: Kernel, run_id: str, done: Callable[[RunRecord], bool]) -> RunRecord:
    deadline = time.monotonic() + WAIT
    while True:
        run = await _read(kernel, run_id)
        assert run.status != "interrupted", "the run read interrupted while its process lives"
        if done(run) or time.monotonic() > deadline:
            return run
        await trio.sleep(0.02)


async def test_an_outcome_the_store_refused_is_written_once_it_answers(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    # Open: the kernel's nursery keeps the run's lease and its unstored outcome after the run
    # returned (a served kernel is always open; a run of one that is not has one last try).
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", session_id="s")
        # The client is told at once, while the database is still locked.
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        assert "database is locked" in (result.error or "")
        assert holder.in_transaction
        # Still locked: the run reads running (its lease kept alive), never interrupted.
        run = await _read(kernel, result.run_id)
        assert run.status == "running"
        assert run.lease_key is not None
        lease = await kernel.store().get_lease(run.lease_key)
        assert lease is not None
        assert lease.holder == result.run_id
        await trio.sleep(0.3)  # a few heartbeats that fail to write: still running
        assert (await _read(kernel, result.run_id)).status == "running"

        holder.execute("ROLLBACK")  # the store answers again
        run = await _poll(kernel, result.run_id, lambda run: run.status != "running")
        assert (run.status, run.incomplete_reason) == ("failed", "storage_error")
        assert run.metadata is not None
        assert "database is locked" in run.metadata["error"]
        # The turn that could not be stored (the tool call the store failed after) is stored
        # too, with the run's ending as its reply metadata.
        entries = await kernel.store().history("s")
        assert [(e.role, e.content) for e in entries][1:] == [("assistant", ""), ("tool", "locked")]
        assert entries[1].metadata is not None
        assert entries[1].metadata["incomplete_reason"] == "storage_error"
        # Then the lease is given back, and nothing is left pending.
        deadline = time.monotonic() + WAIT
        while await kernel.store().get_lease(run.lease_key) is not None:
            assert time.monotonic() < deadline, "the run's lease was not released"
            await trio.sleep(0.02)
        assert kernel.leases.pending() == 0


async def test_an_outcome_pending_when_its_lease_is_taken_over_is_dropped(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    # Open: the kernel's nursery keeps the run's lease and its unstored outcome after the run
    # returned (a served kernel is always open; a run of one that is not has one last try).
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", session_id="s")
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        run = await _read(kernel, result.run_id)
        assert run.status == "running"
        assert run.lease_key is not None
        assert kernel.leases.pending() == 1
        # Another process takes the lease over (a greater token) and the store answers again.
        now = time.time()
        holder.execute(
            "UPDATE leases SET token = token + 1, owner_id = 'another-process', holder = 'R2',"
            " acquired_at = ?, renewed_at = ?, expires_at = ? WHERE key = ?",
            (now, now, now + 60, run.lease_key),
        )
        holder.execute("COMMIT")
        deadline = time.monotonic() + WAIT
        while kernel.leases.pending():
            assert time.monotonic() < deadline, "the pending outcome was not dropped"
            await trio.sleep(0.02)
        await trio.sleep(0.3)  # a few more heartbeats: nothing is written under a lost lease
        run = await _read(kernel, result.run_id)
        assert run.status == "interrupted"  # not finished: its stored status is still running
        assert run.metadata is None
        assert run.finished_at is None
        lease = await kernel.store().get_lease(run.lease_key)
        assert lease is not None
        assert lease.holder == "R2"


async def test_closing_makes_one_last_attempt_then_gives_the_outcome_up(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    # Open: the kernel's nursery keeps the run's lease and its unstored outcome after the run
    # returned (a served kernel is always open; a run of one that is not has one last try).
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", session_id="s")
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        assert kernel.leases.pending() == 1
        await kernel.leases.aclose()  # the store still refuses: given up
        assert kernel.leases.pending() == 0
        holder.execute("ROLLBACK")
        run = await _read(kernel, result.run_id)
        assert run.metadata is None
        assert run.finished_at is None


async def test_closing_stores_a_pending_outcome_the_store_takes_now(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel], workspace: Workspace
) -> None:
    # Heartbeats too rare to write it before the close does.
    workspace.write_config("store: {busy_timeout: 100ms}\nleases: {ttl: 60s, heartbeat: 20s}\n")
    kernel = make_kernel()
    # Open: the kernel's nursery keeps the run's lease and its unstored outcome after the run
    # returned (a served kernel is always open; a run of one that is not has one last try).
    async with open_kernel(kernel=kernel, services="runs"):
        result = await kernel.run("a", "go", session_id="s")
        assert kernel.leases.pending() == 1
        holder.execute("ROLLBACK")
        await kernel.leases.aclose()
        assert kernel.leases.pending() == 0
        run = await _read(kernel, result.run_id)
        assert (run.status, run.incomplete_reason) == ("failed", "storage_error")
        assert run.lease_key is not None
        assert await kernel.store().get_lease(run.lease_key) is None  # released


async def test_a_run_of_a_kernel_that_is_not_open_makes_one_last_attempt_as_it_returns(
    holder: sqlite3.Connection, make_kernel: Callable[..., Kernel]
) -> None:
    """Without an open kernel the run's background work is the run's own: its outcome gets one
    last attempt before the run returns, and is then given up (the run reads interrupted
    once its lease lapses, as a crashed one does)."""
    kernel = make_kernel()
    try:
        result = await kernel.run("a", "go", session_id="s")
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        assert kernel.leases.pending() == 0  # nothing is kept once the run returned
        holder.execute("ROLLBACK")
        run = await _read(kernel, result.run_id)
        assert run.metadata is None
    finally:
        await kernel.aclose()
