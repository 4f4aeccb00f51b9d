"""What a run's start and finish must keep while they get cheaper (decision 0048).

The proof's bytes and sha256 are a contract (a verifier recomputes them), and so is a lease key
(stores shared by processes of several versions keep it); the caches a run's start reads
(reservation caps, a request's fingerprint) must still see a configuration change.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable

import attrs
import pytest
import trio

from soulacy.kernel import CapacityError, Kernel, RunIdInUse, RunRequest
from soulacy.kernel.engine import new_id
from soulacy.kernel.store import (
    ConversationKey,
    LeaseOwner,
    RunRecord,
    ToolRecord,
    canonical_json,
)
from soulacy.plugins.memory_store._store import MemoryStore
from soulacy.plugins.proofkit import make_proof
from soulacy.testing import Workspace

Make = Callable[..., Kernel]

TOOL_THEN_ANSWER = [{"tool": "echo", "arguments": {"text": "hi"}, "id": "c1"}, {"text": "done"}]


def echo_agent(workspace: Workspace, **keys: object) -> None:
    """Agent ``a``: a tool call, then an answer (two turns), as often as it is run."""
    workspace.scripted_agent("a", TOOL_THEN_ANSWER, tools=["tools.py:echo"], repeat=True, **keys)
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        'def echo(text: str) -> str:\n    """Says it again."""\n    return text\n'
    )


PINNED_BODY_START = (
    '{"agent_id":"agent-é","assertions":[{"evidence":{"text":"done"},"kind":"reply_contains",'
    '"ok":true}],"incomplete_reason":null,"receipts":[{"arguments":"{\\"a\\":\\"ü\\",\\"i\\":1,'
    '\\"z\\":[1,2.5,null,true]}","at":1700000000.25,"call_id":"c1","is_error":false,'
    '"result":"ok-1","tool":"step"},{"arguments":"{\\"x\\"'
)
PINNED_SHA256 = "fac1fb25ab7edde7f7a2e7864391fa4a37eaa6fecfde99d14ebb83c535ab9c4f"
PINNED_EMPTY = (
    '{"agent_id":null,"assertions":[],"incomplete_reason":"max_turns","receipts":[],'
    '"run_id":"r-2","session_id":null,"status":"failed","verification":null}'
)
PINNED_EMPTY_SHA256 = "8b4982d982601671f1c24f213a032b593fd2e4016ad1da22a61871a9912be4b9"


def test_the_bytes_and_sha256_of_a_proof_are_pinned() -> None:
    metadata = {
        "run_id": "r-1",
        "agent_id": "agent-é",
        "session_id": "s-1",
        "status": "completed",
        "verification": "verified",
        "incomplete_reason": None,
        "turns": 2,
        "tokens": {"input": 3, "output": 4, "total": 7},
    }
    records = [
        ToolRecord(
            "r-1",
            "c1",
            "step",
            {"i": 1, "z": [1, 2.5, None, True], "a": "ü"},
            "ok-1",
            False,
            1700000000.25,
        ),
        # both text fields past the receipt bound: cut, with the marker and the counts
        ToolRecord("r-1", "c2", "big", {"x": "y" * 5000}, "é" * 4100, True, 1700000001.5),
    ]
    assertions = [{"kind": "reply_contains", "ok": True, "evidence": {"text": "done"}}]
    proof = make_proof("r-1", metadata, records, assertions)
    assert proof.body.startswith(PINNED_BODY_START)
    assert len(proof.body) == 8584
    assert proof.sha256 == PINNED_SHA256 == hashlib.sha256(proof.body.encode()).hexdigest()
    assert proof.receipts == 2
    assert proof.data()["receipts"][1]["truncated"] == {
        "arguments": True,
        "result": True,
        "result_chars": 4100,
    }
    empty = make_proof("r-2", {"status": "failed", "incomplete_reason": "max_turns"}, [])
    assert (empty.body, empty.sha256, empty.receipts) == (PINNED_EMPTY, PINNED_EMPTY_SHA256, 0)


def test_a_lease_key_is_pinned() -> None:
    assert ConversationKey("a", "s-é", None, "u").lease_key() == (
        'conversation:["a", "s-é", null, "u"]'
    )
    assert ConversationKey("a", "s", 'p"q').lease_key() == 'conversation:["a", "s", "p\\"q", null]'


async def test_a_stored_proof_is_the_proof_of_the_stored_run(
    workspace: Workspace, make_kernel: Make
) -> None:
    """The proof a run stores is make_proof of its reply metadata and its tool records."""
    echo_agent(workspace)
    kernel = make_kernel(plugins=["no:sqlite_store"])
    result = await kernel.run("a", "go", session_id="s")
    store = kernel.store()
    proof = await store.get_proof(result.run_id)
    assert proof is not None
    assert result.proof is not None
    record = await store.get_run(result.run_id)
    assert record is not None
    assert record.metadata is not None
    records = list((await store.load_tool_records(result.run_id)).values())
    again = make_proof(result.run_id, record.metadata, records, result.assertions)
    assert (again.body, again.sha256) == (proof.body, proof.sha256)
    assert result.proof == {"sha256": proof.sha256, "receipts": 1}
    await kernel.aclose()


def reservation(
    text: str = "",
    overrides: dict[str, object] | None = None,
    run_id: str = "r",
    session_id: str = "s",
) -> RunRequest:
    """A request of agent ``a`` to reserve (the runner reserves requests, not bare ids)."""
    return RunRequest("a", text, session_id=session_id, run_id=run_id, overrides=overrides or {})


def test_the_request_fingerprint_is_the_canonical_json_of_the_input(kernel: Kernel) -> None:
    runner = kernel.runner()
    for text, overrides in (
        ("go é", {}),
        ('"quoted"\n\ud800', None),
        ("go", {"max_turns": 3, "budget": {"max_tokens": 5}}),
    ):
        handle = runner.reserve(reservation(text, overrides))
        assert handle.request == canonical_json({"text": text, "overrides": overrides or {}})
        runner.release(handle)


def test_a_retry_of_the_same_request_queues_and_another_is_refused(kernel: Kernel) -> None:
    runner = kernel.runner()
    first = runner.reserve(reservation("go", {"a": 1}))
    again = runner.reserve(reservation("go", {"a": 1}))
    with pytest.raises(RunIdInUse):
        runner.reserve(reservation("go", {"a": 2}))
    with pytest.raises(RunIdInUse):
        runner.reserve(reservation("go!"))
    with pytest.raises(RunIdInUse):
        runner.reserve(reservation("go", {}))
    runner.release(first)
    runner.release(again)
    plain = runner.reserve(reservation("go"))
    with pytest.raises(RunIdInUse):
        runner.reserve(reservation("go", {"a": 1}))
    runner.release(plain)


def test_a_changed_cap_applies_to_the_next_reservation(kernel: Kernel) -> None:
    runner = kernel.runner()
    kernel.update_config({"runtime.max_concurrent_sessions": 1})
    held = runner.reserve(reservation(run_id="r1", session_id="s1"))
    with pytest.raises(CapacityError):
        runner.reserve(reservation(run_id="r2", session_id="s2"))
    kernel.update_config({"runtime.max_concurrent_sessions": 2})
    second = runner.reserve(reservation(run_id="r2", session_id="s2"))
    kernel.update_config({"runtime.max_concurrent_sessions_per_principal": 2})
    with pytest.raises(CapacityError):
        runner.reserve(reservation(run_id="r3", session_id="s3"))
    runner.release(held)
    runner.release(second)


async def test_a_policy_change_between_two_runs_is_seen(
    workspace: Workspace, make_kernel: Make
) -> None:
    """The cached policy of a run's start: a config change and a reloaded SOUL.yaml show at
    the next run (each of these runs needs two turns)."""
    echo_agent(workspace)
    kernel = make_kernel(plugins=["no:sqlite_store"])
    assert (await kernel.run("a", "go")).status == "completed"
    kernel.update_config({"runtime.default_max_turns": 1})
    stopped = await kernel.run("a", "go")
    assert (stopped.status, stopped.incomplete_reason) == ("incomplete", "max_turns")
    kernel.update_config({"runtime.default_max_turns": 5})
    assert (await kernel.run("a", "go")).status == "completed"
    echo_agent(workspace, max_turns=1)
    assert (await kernel.run("a", "go")).status == "completed"  # the loaded copy, until
    kernel.forget_agent("a")  # what the portal's agent editor does after saving
    stopped = await kernel.run("a", "go")
    assert (stopped.status, stopped.incomplete_reason) == ("incomplete", "max_turns")
    await kernel.aclose()


async def test_a_free_lease_is_granted_at_once_and_a_queue_keeps_its_order() -> None:
    """The in-memory store's shortcut for a free key with nobody queued grants what the
    queue would: the next token, and no waiter left behind."""
    store = MemoryStore()
    me, other = LeaseOwner("me", 1, "h"), LeaseOwner("other", 2, "h")
    first = await store.acquire_lease("k", me, 30.0, holder="r1", queue=True)
    assert first.acquired
    assert first.lease is not None
    assert first.lease.token == 1
    assert store._queues == {}
    waiting = await store.acquire_lease("k", other, 30.0, holder="r2", queue=True)
    assert not waiting.acquired
    assert waiting.ahead == 0
    later = await store.acquire_lease("k", me, 30.0, holder="r3", queue=True)
    assert not later.acquired
    assert later.ahead == 1
    await store.release_lease(first.lease)
    refused = await store.acquire_lease("k", me, 30.0, holder="r3", queue=True)
    assert not refused.acquired
    assert refused.ahead == 1
    granted = await store.acquire_lease("k", other, 30.0, holder="r2", queue=True)
    assert granted.acquired
    assert granted.lease is not None
    assert granted.lease.token == 2
    await store.release_lease(granted.lease)
    third = await store.acquire_lease("k", me, 30.0, holder="r3", queue=True)
    assert third.acquired
    assert third.lease is not None
    assert third.lease.token == 3
    assert store._queues == {}


async def test_concurrent_runs_of_one_conversation_take_turns(
    workspace: Workspace, make_kernel: Make
) -> None:
    """Each run of a conversation sees the whole of the one before (the turn, then the
    lease, serialize them)."""
    workspace.scripted_agent("a", [{"text": "done"}], repeat=True)
    kernel = make_kernel(plugins=["no:sqlite_store"])
    results = []

    async def one() -> None:
        results.append(await kernel.run("a", "go", session_id="s"))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
    assert [r.status for r in results] == ["completed"] * 5
    history = await kernel.store().load_history("a", "s")
    assert [m.role for m in history] == ["user", "assistant"] * 5
    assert kernel.runner().statistics() == {"conversations": 0, "runs": 0}
    await kernel.aclose()


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [1.5, float("inf"), None, True, "é\ud800"], "c": {"z": object}},
        'x"é\n',
        3,
        2.5,
        None,
        [],
        {},
        (1, 2),
        {"k": b"bytes", "n": {"m": [{}]}},
    ],
)
def test_canonical_json_is_json_dumps_sorted_compact_and_unescaped(value: object) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    assert canonical_json(value) == expected


def test_canonical_json_still_refuses_a_circular_value() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular"):
        canonical_json(looped)
    assert canonical_json([1]) == "[1]"  # nothing of the failed call is left behind


def test_run_record_fields_are_the_ones_the_memory_store_copies() -> None:
    """The memory store makes a run's records field by field (not attrs.evolve): a new field
    of RunRecord must be copied there too (plugins/memory_store/_store.py)."""
    assert [f.name for f in attrs.fields(RunRecord)] == [
        "run_id",
        "agent_id",
        "session_id",
        "user_id",
        "principal",
        "status",
        "verification",
        "incomplete_reason",
        "metadata",
        "started_at",
        "finished_at",
        "attempt",
        "lease_key",
        "lease",
    ]


async def test_a_run_record_keeps_its_fields_through_start_and_finish() -> None:
    store = MemoryStore()
    owner = LeaseOwner("me", 1, "h")
    lease = (await store.acquire_lease("k", owner, 30.0, holder="r")).lease
    record = RunRecord("r", "a", "s", "u", "p", started_at=12.5)
    started = await store.start_run(record, lease)
    assert started == attrs.evolve(record, lease_key="k")
    await store.finish_run("r", {"status": "completed", "verification": "unverified"}, lease)
    finished = await store.get_run("r")
    assert finished is not None
    assert finished.finished_at is not None
    assert finished == attrs.evolve(
        started,
        status="completed",
        verification="unverified",
        metadata={"status": "completed", "verification": "unverified"},
        finished_at=finished.finished_at,
    )
    again = await store.start_run(record, lease)  # a retry: the next attempt
    assert (again.attempt, again.status, again.finished_at) == (2, "running", None)


def test_a_new_id_is_a_uuid4_hex() -> None:
    ids = {new_id() for _ in range(200)}
    assert len(ids) == 200
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert (parsed.hex, parsed.version, parsed.variant) == (made, 4, uuid.RFC_4122)


async def test_a_shielded_caller_gives_a_lease_back_without_a_scope_of_its_own(
    kernel: Kernel,
) -> None:
    held = await kernel.leases.acquire("k", holder="one")
    assert held is not None
    with trio.CancelScope() as outer:
        outer.cancel()  # a cancelled caller that shields its finish, as a run's does
        with trio.CancelScope(shield=True):
            await kernel.leases.release(held, shielded=True)
    taken = await kernel.leases.acquire("k", holder="two", wait=False)
    assert taken is not None
    assert taken.lease.token == held.lease.token + 1
    await kernel.leases.release(taken)
