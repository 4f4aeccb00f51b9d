"""The SQLite store's leases, fencing, attempts, counters and cancel requests (schema v6)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
import trio

from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    Checkpoint,
    Lease,
    LeaseLost,
    LeaseOwner,
    RunRecord,
    StorageError,
    ToolRecord,
)
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore
from soulacy.plugins.sqlite_store._schema import MIGRATIONS

TINY = 0.2  # seconds: a lease that lives through a few calls, then expires
NAP = 0.4  # seconds: past TINY

A, B, C = (LeaseOwner.current(name) for name in ("owner-a", "owner-b", "owner-c"))


def dead_owner(name: str = "dead") -> LeaseOwner:
    """An owner whose process has exited: a child that ran and was waited for."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return attrs.evolve(LeaseOwner.current(name), pid=child.pid)


def metadata(status: str) -> dict[str, str]:
    return {"status": status, "verification": "unverified"}


async def grant(
    store: SQLiteStore, key: str, owner: LeaseOwner, ttl: float, holder: str = ""
) -> Lease:
    got = await store.acquire_lease(key, owner, ttl, holder=holder)
    assert got.acquired, got
    assert got.lease is not None
    return got.lease


# -- acquire, renew, release -------------------------------------------------------------------


async def test_acquire_renew_release_and_the_token_only_grows(store: SQLiteStore) -> None:
    first = await store.acquire_lease("k", A, 10, holder="h")
    assert first.acquired
    assert first.took_over_from is None
    assert first.ahead == 0
    assert first.lease is not None
    lease = first.lease
    assert (lease.key, lease.owner, lease.token, lease.holder) == ("k", A, 1, "h")
    assert lease.expires_at == pytest.approx(lease.acquired_at + 10)

    again = await store.acquire_lease("k", A, 20, holder="h")  # same owner and holder: renewed
    assert again.acquired
    assert again.lease is not None
    assert again.lease.token == 1
    assert again.lease.acquired_at == lease.acquired_at
    assert again.lease.expires_at > lease.expires_at

    other_holder = await store.acquire_lease("k", A, 10, holder="another run")
    assert not other_holder.acquired
    assert other_holder.lease is not None
    assert other_holder.lease.holder == "h"
    refused = await store.acquire_lease("k", B, 10, holder="h")
    assert not refused.acquired
    assert refused.lease is not None
    assert (refused.lease.owner.id, refused.lease.token, refused.lease.expired) == (A.id, 1, False)

    renewed = await store.renew_leases([lease], 30)
    assert [r.token for r in renewed] == [1]
    assert renewed[0].expires_at >= renewed[0].renewed_at + 29
    stored = await store.get_lease("k")
    assert stored is not None
    assert (stored.owner, stored.token, stored.holder, stored.expired) == (A, 1, "h", False)
    assert stored.renewed_at == pytest.approx(renewed[0].renewed_at)

    await store.release_lease(lease)
    assert await store.get_lease("k") is None
    await store.release_lease(lease)  # releasing twice changes nothing
    assert await store.renew_leases([lease], 10) == []  # a released lease is lost

    back = await grant(store, "k", A, 10, holder="h")  # even the same owner: a new token
    assert back.token == 2
    await store.release_lease(back)
    taken = await grant(store, "k", B, 10)
    assert taken.token == 3
    await store.release_lease(back)  # a stale release does not free another's lease
    current = await store.get_lease("k")
    assert current is not None
    assert (current.owner.id, current.token) == (B.id, 3)
    assert await store.renew_leases([], 10) == []


async def test_an_expired_lease_is_taken_over_with_a_greater_token(store: SQLiteStore) -> None:
    mine = await grant(store, "k", A, TINY, holder="r1")
    refused = await store.acquire_lease("k", B, 10, holder="r1")
    assert not refused.acquired
    await trio.sleep(NAP)
    seen = await store.get_lease("k")
    assert seen is not None
    assert seen.expired
    taken = await store.acquire_lease("k", B, 10, holder="r1")
    assert taken.acquired
    assert taken.lease is not None
    assert taken.lease.token == 2
    assert taken.lease.owner == B
    assert taken.took_over_from is not None
    assert (taken.took_over_from.owner, taken.took_over_from.token) == (A, 1)
    assert taken.took_over_from.expired
    assert await store.renew_leases([mine], 10) == []  # the old holder learns it lost it
    assert [lease.token for lease in await store.renew_leases([taken.lease], 10)] == [2]
    late = await store.acquire_lease("k", A, 10, holder="r1")
    assert not late.acquired  # the old owner asking again is refused like anyone


async def test_a_lease_of_a_provably_gone_owner_is_taken_over(store: SQLiteStore) -> None:
    dead = dead_owner()
    assert dead.provably_gone()
    await grant(store, "k", dead, 3600)
    taken = await store.acquire_lease("k", A, 10)
    assert taken.acquired
    assert taken.lease is not None
    assert taken.lease.token == 2
    assert taken.took_over_from is not None
    assert taken.took_over_from.owner == dead
    assert not taken.took_over_from.expired  # not expired: its owner is gone

    remote = LeaseOwner("remote", 1, "another-host.invalid")  # never provably gone from here
    await grant(store, "r", remote, 3600)
    assert not (await store.acquire_lease("r", A, 10)).acquired


async def test_queued_callers_are_served_in_arrival_order(store: SQLiteStore) -> None:
    held = await grant(store, "q", A, 30)
    b = await store.acquire_lease("q", B, 30, queue=True)
    assert (b.acquired, b.ahead) == (False, 0)
    assert b.lease is not None
    assert b.lease.owner == A
    c = await store.acquire_lease("q", C, 30, queue=True)
    assert (c.acquired, c.ahead) == (False, 1)
    assert (await store.acquire_lease("q", B, 30, queue=True)).ahead == 0  # keeps its place
    assert (await store.acquire_lease("q", C, 30, queue=True)).ahead == 1

    await store.release_lease(held)
    c = await store.acquire_lease("q", C, 30, queue=True)  # free, but B came first
    assert (c.acquired, c.lease, c.ahead) == (False, None, 1)
    b = await store.acquire_lease("q", B, 30, queue=True)
    assert b.acquired
    assert b.lease is not None
    assert b.lease.token == 2
    assert b.ahead == 0
    c = await store.acquire_lease("q", C, 30, queue=True)
    assert (c.acquired, c.ahead) == (False, 0)  # B left the queue when it got the lease
    assert c.lease is not None
    assert c.lease.owner == B
    await store.release_lease(b.lease)
    c = await store.acquire_lease("q", C, 30, queue=True)
    assert c.acquired
    assert c.lease is not None
    assert c.lease.token == 3

    # A waiter that stops asking loses its place once its ttl has passed.
    gone = await store.acquire_lease("q", A, TINY, holder="impatient", queue=True)
    assert (gone.acquired, gone.ahead) == (False, 0)
    patient = await store.acquire_lease("q", B, 30, queue=True)
    assert patient.ahead == 1
    await trio.sleep(NAP)
    assert (await store.acquire_lease("q", B, 30, queue=True)).ahead == 0
    await store.release_lease(c.lease)
    served = await store.acquire_lease("q", B, 30, queue=True)
    assert served.acquired
    assert served.lease is not None

    # A caller that does not queue ignores the queue.
    waiting = await store.acquire_lease("q", C, 30, queue=True)
    assert (waiting.acquired, waiting.ahead) == (False, 0)
    await store.release_lease(served.lease)
    jumped = await store.acquire_lease("q", A, 30)
    assert jumped.acquired


# -- fencing ------------------------------------------------------------------------------------


async def test_a_free_lease_with_nobody_queued_is_granted_without_a_waiters_row(
    store: SQLiteStore,
) -> None:
    """What the queue would grant (the next token, no waiter left behind), without writing a
    waiter's row and deleting it; once anybody waits, the queue decides in arrival order."""
    statements: list[str] = []
    conn = store._conn  # white box: which statements a grant costs is what is pinned here
    assert conn is not None
    conn.set_trace_callback(statements.append)
    first = await store.acquire_lease("k", A, 30.0, holder="r1", queue=True)
    assert first.acquired
    assert first.lease is not None
    assert not [s for s in statements if "lease_waiters" in s and not s.startswith("SELECT")]
    waiting = await store.acquire_lease("k", B, 30.0, holder="r2", queue=True)
    later = await store.acquire_lease("k", C, 30.0, holder="r3", queue=True)
    assert (waiting.acquired, waiting.ahead, later.acquired, later.ahead) == (False, 0, False, 1)
    await store.release_lease(first.lease)
    refused = await store.acquire_lease("k", C, 30.0, holder="r3", queue=True)
    assert (refused.acquired, refused.ahead) == (False, 1)  # free, but r2 came first
    granted = await store.acquire_lease("k", B, 30.0, holder="r2", queue=True)
    assert granted.acquired
    assert granted.lease is not None
    assert granted.lease.token == first.lease.token + 1
    await store.release_lease(granted.lease)
    third = await store.acquire_lease("k", C, 30.0, holder="r3", queue=True)
    assert third.acquired
    assert conn.execute("SELECT count(*) FROM lease_waiters").fetchone() == (0,)


async def test_writes_under_a_lost_lease_are_refused_and_write_nothing(
    store: SQLiteStore,
) -> None:
    old = await grant(store, "conv", A, TINY, holder="r1")
    run = await store.start_run(RunRecord("r1", "agent", "s"), old)
    assert run.lease_key == "conv"
    await trio.sleep(NAP)
    # Expired, but nobody took it over: the token still holds.
    await store.save_state("expired-but-mine", {"n": 1}, old)
    new = await store.acquire_lease("conv", B, 30, holder="r1")
    assert new.acquired
    assert new.lease is not None
    assert new.lease.token == 2

    refused = [
        store.record_turn(
            run,
            [Message("user", "late")],
            [ToolRecord("r1", "c1", "t", {}, "late", False)],
            old,
        ),
        store.finish_run("r1", metadata("completed"), old),
        store.save_checkpoint(Checkpoint("r1", "step", "completed"), old),
        store.save_state("schedule", {"tick": 1}, old),
        store.finalize_proof("r1", metadata("completed"), (), old),
        store.start_run(RunRecord("r1", "agent", "s"), old),
    ]
    for call in refused:
        with pytest.raises(LeaseLost) as lost:
            await call
        assert isinstance(lost.value, StorageError)
        assert (lost.value.key, lost.value.token) == ("conv", 1)
        assert lost.value.current is not None
        assert lost.value.current.token == 2
        assert "token 1" in str(lost.value)
        assert "was lost" in str(lost.value)

    assert await store.history("s") == []
    assert await store.load_tool_records("r1") == {}
    assert await store.load_checkpoints("r1") == []
    assert await store.load_state("schedule") is None
    assert await store.load_state("expired-but-mine") == {"n": 1}
    assert await store.get_proof("r1") is None
    stored = await store.get_run("r1")
    assert stored is not None
    assert (stored.status, stored.metadata, stored.attempt) == ("running", None, 1)

    await store.record_turn(run, [Message("user", "on time")], [], new.lease)  # the new holder
    assert [e.content for e in await store.history("s")] == ["on time"]

    await store.release_lease(new.lease)
    with pytest.raises(LeaseLost, match="now released") as released:
        await store.save_state("schedule", {"tick": 2}, new.lease)
    assert released.value.current is None
    with pytest.raises(LeaseLost):
        await store.save_state("x", {}, Lease("never-granted", A, 1))


async def test_leases_and_fencing_hold_across_two_connections(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    # FULL: every write of both stores runs in a worker thread, so they truly contend.
    one, two = SQLiteStore(path, synchronous="FULL"), SQLiteStore(path, synchronous="FULL")
    owners = [LeaseOwner.current(f"kernel-{n}") for n in range(20)]
    grants: list[bool] = []

    async def ask(store: SQLiteStore, owner: LeaseOwner) -> None:
        grants.append((await store.acquire_lease("conv", owner, 30, holder="r")).acquired)

    try:
        async with trio.open_nursery() as nursery:
            for n, owner in enumerate(owners):
                nursery.start_soon(ask, (one, two)[n % 2], owner)
        assert grants.count(True) == 1
        first = await one.get_lease("conv")
        assert first is not None
        assert first.token == 1
        run = await one.start_run(RunRecord("r", "agent", "s"), first)
        assert len(await one.renew_leases([first], TINY)) == 1  # shortened, to expire soon
        await trio.sleep(NAP)
        taken = await two.acquire_lease("conv", B, 30, holder="r")
        assert taken.acquired
        assert taken.lease is not None
        with pytest.raises(LeaseLost):
            await one.record_turn(run, [Message("user", "stale")], [], first)
        await two.record_turn(run, [Message("user", "current")], [], taken.lease)
        assert [e.content for e in await one.history("s")] == ["current"]
    finally:
        await one.aclose()
        await two.aclose()


# -- attempts -----------------------------------------------------------------------------------


async def test_a_fresh_run_id_has_no_proof_to_set_aside_and_a_retry_sets_its_proof_aside(
    store: SQLiteStore,
) -> None:
    statements: list[str] = []
    conn = store._conn
    assert conn is not None
    conn.set_trace_callback(statements.append)
    await store.start_run(RunRecord("r1", "agent", "s"))
    assert not [s for s in statements if s.startswith("DELETE FROM proofs")]
    await store.finish_run("r1", metadata("completed"))
    proof = await store.finalize_proof("r1", metadata("completed"))
    again = await store.start_run(RunRecord("r1", "agent", "s"))
    assert again.attempt == 2
    assert await store.get_proof("r1") is None  # the retry's proof is not the first one's
    kept = conn.execute("SELECT sha256 FROM superseded_proofs WHERE run_id = 'r1'").fetchall()
    assert kept == [(proof.sha256,)]


async def test_a_retry_is_a_new_attempt_and_the_crashed_one_is_labelled(
    store: SQLiteStore,
) -> None:
    first = await grant(store, "conv", A, TINY, holder="r1")
    one = await store.start_run(RunRecord("r1", "agent", "s"), first)
    assert (one.attempt, one.status, one.lease_key) == (1, "running", "conv")
    await store.record_turn(one, [Message("user", "q"), Message("assistant", "half")], [], first)
    # The first attempt's process dies; another takes the conversation over and retries.
    await trio.sleep(NAP)
    second = await grant(store, "conv", B, 30, holder="r1")
    two = await store.start_run(RunRecord("r1", "agent", "s"), second)
    assert (two.attempt, two.status) == (2, "running")
    await store.record_turn(two, [Message("user", "q"), Message("assistant", "whole")], [], second)
    await store.finish_run("r1", metadata("completed"), second)

    entries = await store.history("s")
    assert [(e.content, e.attempt) for e in entries] == [
        ("q", 1),
        ("half", 1),
        ("q", 2),
        ("whole", 2),
    ]
    interrupted = {"status": "interrupted", "attempt": 1}
    assert [e.metadata for e in entries] == [interrupted, interrupted] + [metadata("completed")] * 2
    run = await store.get_run("r1")
    assert run is not None
    assert (run.status, run.attempt) == ("completed", 2)

    # A third attempt after a finished one: the finished attempt keeps its own metadata.
    three = await store.start_run(RunRecord("r1", "agent", "s"), second)
    assert three.attempt == 3
    assert three.verification is None
    assert three.finished_at is None
    entries = await store.history("s")
    assert [e.metadata for e in entries] == [interrupted, interrupted] + [metadata("completed")] * 2
    await store.finish_run("r1", metadata("failed"), second)
    assert [e.metadata for e in await store.history("s")][2:] == [metadata("completed")] * 2


# -- interrupted runs ---------------------------------------------------------------------------


async def test_a_running_run_whose_lease_does_not_hold_reads_as_interrupted(
    store: SQLiteStore, tmp_path: Path
) -> None:
    async def started(run_id: str, owner: LeaseOwner, ttl: float, holder: str = "") -> Lease:
        lease = await grant(store, f"conv-{run_id}", owner, ttl, holder=holder or run_id)
        await store.start_run(RunRecord(run_id, "agent", f"s-{run_id}"), lease)
        return lease

    await started("live", A, 30)
    expired = await started("expired", A, TINY)
    released = await started("released", A, 30)
    await store.release_lease(released)
    await started("elsewhere", A, 30, holder="another-run")
    await started("dead", dead_owner(), 3600)
    finished = await started("finished", A, TINY)
    await store.finish_run("finished", metadata("completed"), finished)
    await store.start_run(RunRecord("unleased", "agent", "s-unleased"))
    await trio.sleep(NAP)

    statuses = {r.run_id: r.status for r in await store.list_runs()}
    assert statuses == {
        "live": "running",
        "expired": "interrupted",
        "released": "interrupted",
        "elsewhere": "interrupted",
        "dead": "interrupted",
        "finished": "completed",
        "unleased": "interrupted",  # no lease: nothing can prove it alive
    }
    run = await store.get_run("expired")
    assert run is not None
    assert run.status == "interrupted"
    assert run.lease is not None
    assert run.lease["owner"]["id"] == A.id
    assert run.lease["heartbeat_at"] == pytest.approx(expired.renewed_at)
    assert run.lease["token"] == 1
    released_run = await store.get_run("released")
    assert released_run is not None
    assert released_run.lease is None
    live = await store.get_run("live")
    assert live is not None
    assert live.lease is None
    assert live.lease_key == "conv-live"

    other = SQLiteStore(tmp_path / "store.db")  # another process's view of the same file
    try:
        elsewhere = {r.run_id: r.status for r in await other.list_runs(agent_id="agent")}
    finally:
        await other.aclose()
    assert elsewhere == statuses
    await store.finish_run("unleased", metadata("completed"))
    unleased = await store.get_run("unleased")
    assert unleased is not None
    assert unleased.status == "completed"


# -- counters -----------------------------------------------------------------------------------


async def test_spend_refuses_past_the_limit_and_gives_back(store: SQLiteStore) -> None:
    assert await store.counter("cost:2026-12-01") == 0.0
    assert await store.spend("cost:2026-12-01", 4, limit=10) == 4
    assert await store.spend("cost:2026-12-01", 5, limit=10) == 9
    assert await store.spend("cost:2026-12-01", 2, limit=10) is None  # refused: nothing added
    assert await store.counter("cost:2026-12-01") == 9
    assert await store.spend("cost:2026-12-01", 1, limit=10) == 10  # up to the limit
    assert await store.spend("cost:2026-12-01", -3, limit=5) == 7  # a give-back always applies
    assert await store.spend("cost:2026-12-01", 100) == 107  # no limit
    assert await store.counter("cost:2026-12-02") == 0.0

    # Counters untouched for two days are dropped on a later write.
    old = time.time() - 3 * 86400
    await store._write(
        "age", lambda conn: conn.execute("UPDATE counters SET updated_at = ?", (old,))
    )
    await store.spend("tokens:now", 1)
    assert await store.counter("cost:2026-12-01") == 0.0
    assert await store.counter("tokens:now") == 1


async def test_concurrent_spends_of_two_stores_never_pass_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    # FULL: every write of both stores runs in a worker thread, so they truly contend.
    one, two = SQLiteStore(path, synchronous="FULL"), SQLiteStore(path, synchronous="FULL")
    answers: list[float | None] = []

    async def spend(store: SQLiteStore) -> None:
        answers.append(await store.spend("budget", 1, limit=10))

    try:
        await one.open()
        await two.open()
        async with trio.open_nursery() as nursery:
            for _ in range(15):
                nursery.start_soon(spend, one)
                nursery.start_soon(spend, two)
        assert sorted(a for a in answers if a is not None) == [float(n) for n in range(1, 11)]
        assert answers.count(None) == 20
        assert await one.counter("budget") == await two.counter("budget") == 10
    finally:
        await one.aclose()
        await two.aclose()


# -- cancel requests ----------------------------------------------------------------------------


async def test_cancel_requests_are_read_in_order_after_the_last_seen(
    store: SQLiteStore, tmp_path: Path
) -> None:
    assert await store.cancel_requests(0) == []
    first = await store.request_cancel("the user asked", run_id="r1")
    second = await store.request_cancel("shutting down", lease_key="conv")
    assert (first.reason, first.run_id, first.lease_key) == ("the user asked", "r1", None)
    assert second.id > first.id
    other = SQLiteStore(tmp_path / "store.db")  # another process polling the same file
    try:
        assert await other.cancel_requests(0) == [first, second]
        assert await other.cancel_requests(first.id) == [second]
        assert await other.cancel_requests(second.id) == []
    finally:
        await other.aclose()

    # Kept an hour: an older request is no longer answered, and the next request drops it.
    old = time.time() - 3601
    await store._write(
        "age",
        lambda conn: conn.execute(
            "UPDATE cancel_requests SET created_at = ? WHERE id = ?", (old, first.id)
        ),
    )
    assert await store.cancel_requests(0) == [second]
    third = await store.request_cancel("again", run_id="r3")
    ids = await store._read(
        "ids", lambda conn: [r[0] for r in conn.execute("SELECT id FROM cancel_requests")]
    )
    assert ids == [second.id, third.id]
    await store._write("empty", lambda conn: conn.execute("DELETE FROM cancel_requests"))
    assert (await store.request_cancel("later")).id > third.id  # ids are never reused


# -- migration ----------------------------------------------------------------------------------


def version_5_database(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for step in MIGRATIONS[:5]:
        step(conn)
    conn.execute("PRAGMA user_version = 5")
    conn.execute(
        "INSERT INTO runs (run_id, agent_id, session_id, status, started_at, finished_at)"
        " VALUES ('old-running', 'agent', 's', 'running', 1.0, NULL),"
        " ('old-done', 'agent', 's', 'completed', 2.0, 3.0)"
    )
    conn.execute(
        "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
        " created_at, metadata) VALUES ('agent', 's', 'old-running', 'user', 'hi', 1.0, NULL),"
        " ('agent', 's', 'old-done', 'user', 'bye', 2.0, '{\"status\": \"completed\"}')"
    )
    conn.execute(
        "INSERT INTO claims (key, owner, pid, host, acquired_at, heartbeat_at)"
        " VALUES ('claimed', 'old-owner', 1, 'old-host', 10.0, 20.0)"
    )
    conn.close()


async def test_a_version_5_file_upgrades_to_leases_and_attempts(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    version_5_database(path)

    reader = SQLiteStore(path, read_only=True)  # migrated in memory, never on disk
    try:
        run = await reader.get_run("old-running")
        assert run is not None
        assert run.status == "interrupted"
    finally:
        await reader.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    conn.close()

    store = SQLiteStore(path)
    try:
        assert await store.open() == 5
        running = await store.get_run("old-running")
        assert running is not None
        assert (running.status, running.attempt, running.lease_key) == ("interrupted", 1, None)
        done = await store.get_run("old-done")
        assert done is not None
        assert (done.status, done.attempt) == ("completed", 1)
        assert [e.attempt for e in await store.history("s")] == [1, 1]

        claimed = await store.get_lease("claimed")  # a claim becomes an expired lease
        assert claimed is not None
        assert claimed.expired
        assert (claimed.owner.id, claimed.owner.host, claimed.token) == ("old-owner", "old-host", 1)
        taken = await store.acquire_lease("claimed", A, 10)
        assert taken.acquired
        assert taken.lease is not None
        assert taken.lease.token == 2
        assert taken.took_over_from is not None
        assert taken.took_over_from.owner.id == "old-owner"

        retry = await store.start_run(RunRecord("old-running", "agent", "s"))
        assert retry.attempt == 2
        entries = await store.history("s")
        assert entries[0].metadata == {"status": "interrupted", "attempt": 1}
        assert entries[1].metadata == {"status": "completed"}
        assert await store.spend("c", 1) == 1
        assert (await store.request_cancel("x")).id == 1
    finally:
        await store.aclose()

    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"leases", "lease_waiters", "cancel_requests", "counters"} <= tables
        assert "claims" not in tables
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        # Version 6 added history_by_attempt; version 9 drops it (no read needs it any more).
        assert {i for i in indexes if i.startswith("history_")} == {"history_by_owner"}
    finally:
        conn.close()
