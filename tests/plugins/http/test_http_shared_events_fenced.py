"""The store's shared copy of a run's events is written under the lease of the run's attempt:
a process whose attempt lost its lease, or whose events the store refused (a later attempt of
the run began elsewhere), stops sharing that run's log; its own log keeps every event. A
serving kernel gives each run's log its run's lease."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

import attrs
import httpx
import pytest
from _support.http_server import KEYS, open_keyed_server

from soulacy.kernel import Kernel
from soulacy.kernel.store import Lease, LeaseOwner, RunEventBatch, RunRecord
from soulacy.plugins.http._runlog import RunLog
from soulacy.plugins.http._shared import Publisher
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.sqlkit import decode_events
from soulacy.testing import Workspace

KEY = "conversation:shared"


@attrs.define
class Held:
    """What a run holds (``Run.held``): its lease, and whether a renewal found it lost."""

    lease: Lease
    lost: bool = False


def owner(name: str) -> LeaseOwner:
    return LeaseOwner(name, 1, "another-host.invalid")  # never provably gone


async def take(store: MemoryStore, name: str, run_id: str = "R") -> Held:
    """The lease of the run's conversation, taken by ``name`` (over an expired holder)."""
    ttl = 0.0 if name == "paused" else 60.0
    grant = await store.acquire_lease(KEY, owner(name), ttl, holder=run_id)
    assert grant.acquired, grant
    assert grant.lease is not None
    return Held(grant.lease)


def process(store: MemoryStore, held: Held | None, run_id: str = "R") -> tuple[Publisher, RunLog]:
    """A process's publisher, and its log of the run (an attempt holding ``held``)."""
    publisher = Publisher(store, 100)
    log = RunLog(run_id, "alice", 100, publish=publisher.add, held=held)
    return publisher, log


async def stored(store: MemoryStore, run_id: str = "R") -> list[tuple[int, str, str | None]]:
    found = await store.run_events(run_id, 0)
    assert found is not None
    return [(e.id, e.name, e.data.get("status")) for e in found.events]


async def test_a_paused_owner_s_events_are_refused_and_its_log_no_longer_shared(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    run = RunRecord("R", "agent", "shared", principal="alice")
    paused = await take(store, "paused")  # expires at once: the next owner takes it over
    await store.start_run(run, paused.lease)
    first, stale = process(store, paused)
    stale.append("run", {"run_id": "R"})
    await first.flush()
    assert await stored(store) == [(1, "run", None)]

    current = await take(store, "next")
    second, log = process(store, current)
    await store.start_run(run, current.lease)
    log.append("run", {"run_id": "R"})
    log.append("result", {"status": "completed"})
    await second.flush()
    with caplog.at_level(logging.WARNING, "soulacy.http"):
        stale.append("tool.call", {"name": "t"})
        stale.append("result", {"status": "failed"})
        await first.flush()  # refused by the store: a later attempt of the run began
    assert await stored(store) == [(1, "run", None), (2, "result", "completed")]
    assert stale.unshared
    assert "run R: the store refused them" in caplog.text
    assert [e.name for e in stale.events] + [stale.result and stale.result.name] == [
        "run",
        "tool.call",
        "result",
    ]  # its own streams still get its attempt's every event, its ending included
    stale.append("late", {})
    assert not first._pending  # nothing more of it is even queued


async def test_a_log_whose_lease_was_found_lost_writes_nothing_more() -> None:
    store = MemoryStore()
    held = await take(store, "paused")
    publisher, log = process(store, held)
    log.append("run", {"run_id": "R"})
    await publisher.flush()
    held.lost = True  # a renewal found it taken over
    log.append("result", {"status": "failed"})
    await publisher.flush()
    assert log.unshared
    assert await stored(store) == [(1, "run", None)]


async def test_a_retry_in_the_same_process_keeps_sharing_its_own_log() -> None:
    """Two attempts' logs of one run in one flush: the earlier attempt's late events are
    refused (its successor started), the retry's are written and it goes on sharing."""
    store = MemoryStore()
    run = RunRecord("R", "agent", "shared", principal="alice")
    first_held = await take(store, "me")
    await store.start_run(run, first_held.lease)
    publisher, first = process(store, first_held)
    first.append("run", {"run_id": "R"})
    await publisher.flush()
    first.append("result", {"status": "failed"})
    await store.release_lease(first_held.lease)
    again = await take(store, "me")
    await store.start_run(run, again.lease)
    retry = RunLog("R", "alice", 100, publish=publisher.add, held=again)
    retry.append("run", {"run_id": "R"})
    await publisher.flush()
    assert (first.unshared, retry.unshared) == (True, False)
    retry.append("result", {"status": "completed"})
    await publisher.flush()
    assert await stored(store) == [(1, "run", None), (2, "result", "completed")]


async def test_a_store_that_answers_nothing_keeps_every_log_shared() -> None:
    class Older(MemoryStore):  # written before append_run_events answered
        async def append_run_events(  # type: ignore[override]
            self, batches: list[RunEventBatch], keep: int
        ) -> None:
            await super().append_run_events(batches, keep)

    store = Older()
    publisher, log = process(store, None)
    log.append("run", {"run_id": "R"})
    await publisher.flush()
    assert not log.unshared
    assert await stored(store) == [(1, "run", None)]


async def test_a_serving_kernel_shares_each_run_s_events_under_its_lease(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_keyed_server(workspace, make_kernel) as server:
        kernel = server.kernel
        headers = {"Authorization": f"Bearer {KEYS['alice']}"}
        async with httpx.AsyncClient(base_url=server.url + "/api/v1", headers=headers) as client:
            answer = await client.post("/chat", json={"agent_id": "echo", "text": "hi"})
        assert answer.status_code == 200, answer.text
        run_id = answer.json()["run_id"]
    # the http plugin's participant gave the run's log its lease: no plugin registered for it
    assert not [n for n, _ in kernel.pm.list_name_plugin() if n.startswith("http.run-leases")]
    database = workspace.path / "soulacy.db"
    with sqlite3.connect(database) as conn:
        (started,) = conn.execute(
            "SELECT lease_token FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        tokens = conn.execute(
            "SELECT DISTINCT lease_token FROM run_events WHERE run_id = ?", (run_id,)
        ).fetchall()
        rows = conn.execute(
            "SELECT id, last_id, name, data FROM run_events WHERE run_id = ?", (run_id,)
        ).fetchall()
    results = [e.data for row in rows for e in decode_events(row, 0) if e.name == "result"]
    assert started is not None
    assert tokens == [(started,)]  # every event written under the lease the run started under
    assert [r["status"] for r in results] == ["completed"]
