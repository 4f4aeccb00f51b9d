"""``check_store(factory)``: the conformance kit every store implementation runs on itself."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._messages import Message, ToolCall
from ._store import RECEIPT_FIELD_CHARS, RunRecord, ToolRecord

StoreFactory = Callable[[], Any]  # returns a store, or an awaitable of one


async def _make(factory: StoreFactory) -> Any:
    store = factory()
    return await store if inspect.isawaitable(store) else store


async def _close(store: Any) -> None:
    close = getattr(store, "aclose", None)
    if close is not None:
        await close()


def _metadata(run: RunRecord, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "agent_id": run.agent_id,
        "session_id": run.session_id,
        "status": status,
        "verification": "unverified",
        "incomplete_reason": None,
        **extra,
    }


async def _history_round_trip(store: Any) -> None:
    run = RunRecord("kit-r1", "agent", "s1", user_id="u")
    await store.start_run(run)
    call = ToolCall("c1", "read", {"path": "a.txt"})
    messages = [
        Message("user", "hello"),
        Message("assistant", "", (call,)),
        Message("tool", "contents", tool_call_id="c1", name="read"),
        Message("assistant", "done"),
    ]
    await store.record_turn(run, messages[:2], [])
    await store.record_turn(
        run,
        messages[2:],
        [ToolRecord("kit-r1", "c1", "read", {"path": "a.txt"}, "contents", False)],
    )
    loaded = await store.load_history("agent", "s1", None, "u")
    assert loaded == messages, f"history round trip: {loaded!r} != {messages!r}"
    assert await store.load_history("agent", "other", None, "u") == [], "sessions must be separate"
    assert await store.load_history("other-agent", "s1", None, "u") == [], (
        "agents must be separate"
    )
    assert await store.load_history("agent", "s1") == [], "users must be separate"
    entries = await store.history("s1")
    assert [e.role for e in entries] == ["user", "assistant", "tool", "assistant"]
    assert all(e.run_id == "kit-r1" for e in entries)
    assert all(e.metadata is None for e in entries), "metadata arrives with finish_run"


async def _conversations_by_principal(store: Any) -> None:
    """The same agent and session id used by two principals are two conversations."""
    alice = RunRecord("kit-p1", "agent", "shared", principal="alice")
    bob = RunRecord("kit-p2", "agent", "shared", principal="bob")
    for run, text in ((alice, "password hunter2"), (bob, "hello")):
        await store.start_run(run)
        await store.record_turn(run, [Message("user", text)], [])
    seen_by_bob = await store.load_history("agent", "shared", "bob")
    assert [m.content for m in seen_by_bob] == ["hello"], (
        f"bob's conversation must hold only bob's messages, got {seen_by_bob!r}"
    )
    assert await store.load_history("agent", "shared") == [], (
        "no principal (None) is a principal of its own, not a wildcard"
    )
    alice_entries = await store.history("shared", principal="alice")
    assert [e.content for e in alice_entries] == ["password hunter2"], (
        f"history(principal='alice') must hold only alice's entries, got {alice_entries!r}"
    )
    assert all(e.principal == "alice" for e in alice_entries), "entries name their principal"
    every = await store.history("shared")
    assert sorted(e.content for e in every) == ["hello", "password hunter2"], (
        f"history() of every principal must hold both, got {every!r}"
    )


async def _metadata_by_run_id(store: Any) -> None:
    first, second = RunRecord("kit-m1", "agent", "s2"), RunRecord("kit-m2", "agent", "s2")
    for run in (first, second):
        await store.start_run(run)
        await store.record_turn(
            run, [Message("user", run.run_id), Message("assistant", "reply")], []
        )
    await store.finish_run("kit-m1", _metadata(first, "incomplete", incomplete_reason="max_turns"))
    entries = await store.history("s2")
    by_run = {e.run_id: e.metadata for e in entries}
    assert by_run["kit-m1"] is not None
    assert by_run["kit-m1"]["status"] == "incomplete"
    assert by_run["kit-m1"]["incomplete_reason"] == "max_turns"
    assert by_run["kit-m2"] is None, "finishing one run must not touch another run's entries"
    stored = await store.get_run("kit-m1")
    assert stored is not None
    assert stored.status == "incomplete"
    assert stored.incomplete_reason == "max_turns"
    still_running = await store.get_run("kit-m2")
    assert still_running is not None
    assert still_running.status == "running"
    assert await store.get_run("kit-none") is None


async def _runs_listing(store: Any) -> None:
    for n in range(3):
        await store.start_run(RunRecord(f"kit-l{n}", "lister", f"s-l{n}", started_at=1000.0 + n))
    listed = await store.list_runs(limit=2, agent_id="lister")
    assert [r.run_id for r in listed] == ["kit-l2", "kit-l1"], "newest first, limited"


async def _tool_records_replay(store: Any) -> None:
    run = RunRecord("kit-t1", "agent", "s3")
    await store.start_run(run)
    records = [
        ToolRecord("kit-t1", "ok", "read", {"p": 1}, "fine", False),
        ToolRecord("kit-t1", "bad", "write", {"p": 2}, "error: disk full", True),
    ]
    await store.record_turn(run, [], records)
    loaded = await store.load_tool_records("kit-t1")
    assert set(loaded) == {"ok", "bad"}
    assert loaded["bad"].is_error
    assert loaded["bad"].content == "error: disk full"
    assert not loaded["ok"].is_error
    assert loaded["ok"].arguments == {"p": 1}
    assert await store.load_tool_records("kit-none") == {}


async def _proofs(store: Any) -> None:
    run = RunRecord("kit-p1", "agent", "s4")
    await store.start_run(run)
    many = [ToolRecord("kit-p1", f"c{n}", "step", {"i": n}, f"ok-{n}", False) for n in range(1500)]
    long = ToolRecord("kit-p1", "long", "read", {}, "x" * (RECEIPT_FIELD_CHARS + 10), False)
    await store.record_turn(run, [], [*many, long])
    proof = await store.finalize_proof("kit-p1", _metadata(run, "completed"))
    assert proof.receipts == 1501, "every receipt is kept: no count cap"
    assert proof.sha256 == hashlib.sha256(proof.body.encode()).hexdigest()
    body = json.loads(proof.body)
    last = body["receipts"][-1]
    assert last["truncated"]["result"] is True
    assert len(last["result"]) < RECEIPT_FIELD_CHARS + 60
    assert [r["call_id"] for r in body["receipts"][:3]] == ["c0", "c1", "c2"], "call order"
    again = await store.finalize_proof("kit-p1", _metadata(run, "failed"))
    assert again.sha256 == proof.sha256, "a proof is final: finalizing again returns it"
    await store.start_run(run)  # a retry of the same run id: a new attempt
    assert await store.get_proof("kit-p1") is None, "a retry's proof is its own"
    retried = await store.finalize_proof("kit-p1", _metadata(run, "failed"))
    assert retried.sha256 != proof.sha256
    stored = await store.get_proof("kit-p1")
    assert stored is not None
    assert stored.sha256 == retried.sha256
    assert await store.get_proof("kit-none") is None


async def _concurrent_finalization(store: Any) -> None:
    runs = [RunRecord(f"kit-c{n}", "agent", f"s-c{n}") for n in range(32)]
    for run in runs:
        await store.start_run(run)
        await store.record_turn(run, [], [ToolRecord(run.run_id, "c", "t", {}, "r", False)])
    results: dict[str, list[str]] = {}

    async def finalize(run: RunRecord) -> None:
        proof = await store.finalize_proof(run.run_id, _metadata(run, "completed"))
        results.setdefault(run.run_id, []).append(proof.sha256)

    async with trio.open_nursery() as nursery:  # 64 finalizations: each run twice at once
        for run in runs * 2:
            nursery.start_soon(finalize, run)
    assert len(results) == 32
    assert all(len(set(v)) == 1 and len(v) == 2 for v in results.values())
    for run in runs:
        assert await store.get_proof(run.run_id) is not None


STORE_CHECKS: tuple[Callable[[Any], Awaitable[None]], ...] = (
    _history_round_trip,
    _conversations_by_principal,
    _metadata_by_run_id,
    _runs_listing,
    _tool_records_replay,
    _proofs,
    _concurrent_finalization,
)


async def check_store(factory: StoreFactory) -> None:
    """Run every store check, each on a fresh store from ``factory`` (sync or async).

    A store that serves ``soulacy_conversation_store`` and ``soulacy_proof_store`` must pass;
    a failure raises AssertionError naming the check.
    """
    for check in STORE_CHECKS:
        store = await _make(factory)
        try:
            await check(store)
        except AssertionError as exc:
            raise AssertionError(f"store check {check.__name__.strip('_')}: {exc}") from exc
        finally:
            await _close(store)
