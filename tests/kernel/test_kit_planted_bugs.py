"""Each conformance kit is proven by planted bugs: every one is caught, with a message that
names the check and says what was expected and what came back.

Every planted implementation is the right one (MemoryStore, a small reference detector, a
reference transport) with one thing wrong. Each bug's test runs the one check it targets
(``only=``); the reference implementations run each kit whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import pickle
import re
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
import trio.testing
from _support.openai_server import serve_asgi

from soulacy.kernel.contracts import Verdict
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    CancelRequest,
    Checkpoint,
    Ending,
    EveryPrincipal,
    HistoryEntry,
    Lease,
    LeaseGrant,
    LeaseLost,
    LeaseOwner,
    ProofRecord,
    RunEventBatch,
    RunEvents,
    RunRecord,
    StateRow,
    StorageError,
    ToolRecord,
    canonical_json,
)
from soulacy.plugins.http.testing import check_http_api
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.progress import SignatureDetector
from soulacy.plugins.proofkit import make_proof
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import (
    CHECKPOINT_CHECK_NAMES,
    PROCESS_CHECK_NAMES,
    PROGRESS_CHECK_NAMES,
    STORE_CHECK_NAMES,
    check_checkpoint_store,
    check_progress_detector,
    check_store,
    check_store_processes,
)

# "<kit> check <name>: <what>: expected <E>, got <G>", neither part empty.
MESSAGE = re.compile(r"^[\w ]+ check \w+: .*\S.*: expected \S.*, got \S.*", re.DOTALL)


def assert_reported(exc: BaseException, kit: str, check: str) -> None:
    message = str(exc)
    assert message.startswith(f"{kit} check {check}: "), (
        f"expected the failure to name '{kit} check {check}', got {message!r}"
    )
    assert MESSAGE.match(message), (
        f"expected '<what>: expected <E>, got <G>' in the failure, got {message!r}"
    )


# -- stores -------------------------------------------------------------------------------------


class FailingStore(MemoryStore):
    """Storage that is gone: every call raises StorageError, as a broken file store does."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        planted = name in type(self).__dict__  # a subclass's own method: the planted bug
        if callable(value) and not name.startswith("_") and name != "aclose" and not planted:

            async def fail(*args: Any, **kwargs: Any) -> Any:
                raise StorageError(f"disk gone: {name}")

            return fail
        return value


class FailedHistoryReadsEmpty(FailingStore):
    async def load_history(self, *args: Any, **kwargs: Any) -> list[Message]:
        return []  # the bug: a failed read looks like a new conversation


class HistoryIgnoresAgent(MemoryStore):
    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        return await super().history(session_id, None, principal)


class HistoryIgnoresPrincipal(MemoryStore):
    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        return await super().history(session_id, agent_id)


class HistoryNewestFirst(MemoryStore):
    async def history(self, *args: Any, **kwargs: Any) -> list[HistoryEntry]:
        return list(reversed(await super().history(*args, **kwargs)))


class HistoryWithoutMetadata(MemoryStore):
    async def history(self, *args: Any, **kwargs: Any) -> list[HistoryEntry]:
        return [attrs.evolve(e, metadata=None) for e in await super().history(*args, **kwargs)]


class HistoryLosesToolCalls(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        plain = [attrs.evolve(m, tool_calls=()) for m in messages]
        await super().record_turn(run, plain, tools, fence)


class LoadHistoryIgnoresPrincipal(MemoryStore):
    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        recorded = [  # (entry id, run id, attempt, time, message), as the store keeps them
            r
            for key, found in self._by_conversation.items()
            if (key.agent_id, key.session_id, key.user_id) == (agent_id, session_id, user_id)
            for r in found
        ]
        return [r[4] for r in sorted(recorded, key=lambda r: r[0])]


class LoadHistoryIgnoresUser(MemoryStore):
    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        recorded = [  # (entry id, run id, attempt, time, message), as the store keeps them
            r
            for key, found in self._by_conversation.items()
            if (key.agent_id, key.session_id, key.principal) == (agent_id, session_id, principal)
            for r in found
        ]
        return [r[4] for r in recorded]


class LoadHistoryNewestFirst(MemoryStore):
    async def load_history(self, *args: Any, **kwargs: Any) -> list[Message]:
        return list(reversed(await super().load_history(*args, **kwargs)))


class FinishRunTouchesOtherRuns(MemoryStore):
    """Metadata set by session, not by run id: every run of the session gets it."""

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        await super().finish_run(run_id, metadata, fence)
        session = self._runs[run_id].session_id
        for other in self._runs.values():
            if other.session_id == session:
                self._reply_metadata[(other.run_id, other.attempt)] = dict(metadata)


class FinishRunLeavesRunRunning(MemoryStore):
    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        self._reply_metadata[(run_id, self._runs[run_id].attempt)] = dict(metadata)


class GetRunRaisesForUnknown(MemoryStore):
    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._as_read(self._runs[run_id], time.time())


class ListRunsOldestFirst(MemoryStore):
    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        runs = [r for r in self._runs.values() if agent_id is None or r.agent_id == agent_id]
        return sorted(runs, key=lambda r: r.started_at)[:limit]


class ListRunsIgnoresAgent(MemoryStore):
    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        return await super().list_runs(limit)


class ToolRecordsLost(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        await super().record_turn(run, messages, [], fence)


class ToolRecordsOfLastTurnOnly(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        self._tools.pop(run.run_id, None)
        await super().record_turn(run, messages, tools, fence)


class ToolErrorsLost(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        plain = [attrs.evolve(t, is_error=False) for t in tools]
        await super().record_turn(run, messages, plain, fence)


class ToolRecordsByCallIdOnly(MemoryStore):
    """Call ids are unique per run only; this store keys them across runs."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        await super().record_turn(run, messages, tools, fence)
        for record in tools:
            for records in self._tools.values():
                if record.call_id in records:
                    records[record.call_id] = record


class CappedReceipts(MemoryStore):
    """The original system's bug: a proof keeps at most 1024 receipts."""

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Any] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self._check_fence(fence)
        if run_id not in self._proofs:
            records = list(self._tools.get(run_id, {}).values())[:1024]
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]


class UnboundedReceipts(MemoryStore):
    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Any] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self._check_fence(fence)
        if run_id not in self._proofs:
            records = self._tools.get(run_id, {}).values()
            receipts = [{"call_id": r.call_id, "result": r.content} for r in records]
            body = canonical_json({"status": metadata.get("status"), "receipts": receipts})
            sha = hashlib.sha256(body.encode()).hexdigest()
            self._proofs[run_id] = ProofRecord(run_id, sha, body, len(receipts))
        return self._proofs[run_id]


class ProofInAFormatOfItsOwn(MemoryStore):
    """The receipts are all there and bounded, the hash is of the body, but the body is not
    the proof toolkit's canonical JSON (spaces after separators): a proof copied to another
    store, which builds its own with make_proof, would no longer verify."""

    async def finalize_proof(self, *args: Any, **kwargs: Any) -> ProofRecord:
        proof = await super().finalize_proof(*args, **kwargs)
        body = json.dumps(json.loads(proof.body), sort_keys=True, ensure_ascii=False)
        return attrs.evolve(proof, body=body, sha256=hashlib.sha256(body.encode()).hexdigest())


class ProofHashOfSomethingElse(MemoryStore):
    async def finalize_proof(self, *args: Any, **kwargs: Any) -> ProofRecord:
        proof = await super().finalize_proof(*args, **kwargs)
        return attrs.evolve(proof, sha256=hashlib.sha256(b"x" + proof.body.encode()).hexdigest())


class ProofNotFinal(MemoryStore):
    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Any] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self._proofs.pop(run_id, None)
        return await super().finalize_proof(run_id, metadata, assertions, fence)


class RetryKeepsOldProof(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        proof = self._proofs.get(run.run_id)
        stored = await super().start_run(run, fence)
        if proof is not None:
            self._proofs[run.run_id] = proof
        return stored


class RacyFinalization(MemoryStore):
    """Checks for a stored proof, yields, then stores its own: concurrent callers disagree."""

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Any] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self._check_fence(fence)
        if run_id not in self._proofs:
            records = list(self._tools.get(run_id, {}).values())
            await trio.lowlevel.checkpoint()
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]


class StateRowWrittenApart(MemoryStore):
    """The turn, then its state row: two steps, so a row that fails leaves half a turn."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
    ) -> None:
        await super().record_turn(run, messages, tools, fence)
        if state is not None:
            await self.save_state(state.key, state.value, fence, run_id=run.run_id)


class StateRowDropped(MemoryStore):
    """Takes ``state=`` and writes the turn only."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
    ) -> None:
        await super().record_turn(run, messages, tools, fence)


class StateRowOutsideTheFence(MemoryStore):
    """The state row written before the lease is asked: a stale owner still writes it."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
    ) -> None:
        if state is not None:
            await self.save_state(state.key, state.value, run_id=run.run_id)
        await super().record_turn(run, messages, tools, fence)


class EndingWrittenApart(MemoryStore):
    """The last turn, then the run's end, then its proof: three steps, so a proof that cannot
    be made leaves the answer and a finished run without it."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
        ending: Ending | None = None,
    ) -> ProofRecord | None:
        await super().record_turn(run, messages, tools, fence, state=state)
        if ending is None:
            return None
        await self.finish_run(run.run_id, ending.metadata, fence)
        return await self.finalize_proof(run.run_id, ending.metadata, ending.assertions, fence)


class EndingDropsTheProof(MemoryStore):
    """Takes ``ending=``, writes the turn and the run's status, and answers a proof it never
    stores (made first: an end that cannot be stored still writes nothing)."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
        ending: Ending | None = None,
    ) -> ProofRecord | None:
        if ending is None:
            return await super().record_turn(run, messages, tools, fence, state=state)
        # Made first (an end that cannot be stored writes nothing), then never stored.
        records = [*(await self.load_tool_records(run.run_id)).values(), *tools]
        proof = make_proof(run.run_id, ending.metadata, records, ending.assertions)
        await super().record_turn(run, messages, tools, fence, state=state)
        await self.finish_run(run.run_id, ending.metadata, fence)
        return proof


class EndingOutsideTheFence(MemoryStore):
    """The run's status written before the lease is asked (once the proof is known to be
    makeable): a stale owner still finishes the run (then the turn and the proof are
    refused)."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
        ending: Ending | None = None,
    ) -> ProofRecord | None:
        if ending is not None:
            make_proof(run.run_id, ending.metadata, tools, ending.assertions)  # it can be made
            await self.finish_run(run.run_id, ending.metadata)
        return await super().record_turn(run, messages, tools, fence, state=state, ending=ending)


# planted bug -> (factory, failing factory, the check that must catch it)
STORE_BUGS: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None, str]] = {
    "history ignores its agent_id filter": (HistoryIgnoresAgent, None, "history_by_agent"),
    "history(principal=...) ignores its filter": (
        HistoryIgnoresPrincipal,
        None,
        "conversations_by_principal",
    ),
    "history newest first": (HistoryNewestFirst, None, "history_round_trip"),
    "history without metadata": (HistoryWithoutMetadata, None, "metadata_by_run_id"),
    "tool calls of messages lost": (HistoryLosesToolCalls, None, "history_round_trip"),
    "another principal's history leaks into load_history": (
        LoadHistoryIgnoresPrincipal,
        None,
        "conversations_by_principal",
    ),
    "load_history ignores the user": (LoadHistoryIgnoresUser, None, "history_round_trip"),
    "load_history newest first": (LoadHistoryNewestFirst, None, "history_round_trip"),
    "finish_run touches another run's entries": (
        FinishRunTouchesOtherRuns,
        None,
        "metadata_by_run_id",
    ),
    "finish_run leaves the run running": (FinishRunLeavesRunRunning, None, "metadata_by_run_id"),
    "get_run of an unknown id raises": (GetRunRaisesForUnknown, None, "metadata_by_run_id"),
    "list_runs oldest first": (ListRunsOldestFirst, None, "runs_listing"),
    "list_runs ignores agent_id": (ListRunsIgnoresAgent, None, "runs_listing"),
    "tool records do not survive": (ToolRecordsLost, None, "tool_records_replay"),
    "tool records of the last turn only": (ToolRecordsOfLastTurnOnly, None, "tool_records_replay"),
    "tool errors recorded as successes": (ToolErrorsLost, None, "tool_records_replay"),
    "tool records keyed by call id across runs": (
        ToolRecordsByCallIdOnly,
        None,
        "tool_records_replay",
    ),
    "a proof drops receipts beyond 1024": (CappedReceipts, None, "proofs"),
    "receipt fields unbounded": (UnboundedReceipts, None, "proofs"),
    "a proof in a format of its own": (ProofInAFormatOfItsOwn, None, "proofs"),
    "proof hash of something else": (ProofHashOfSomethingElse, None, "proofs"),
    "a proof is not final": (ProofNotFinal, None, "proofs"),
    "a retry keeps the old proof": (RetryKeepsOldProof, None, "proofs"),
    "racy concurrent finalization": (RacyFinalization, None, "concurrent_finalization"),
    "a failed history read is empty": (MemoryStore, FailedHistoryReadsEmpty, "failures_raise"),
    "a turn's state row written apart from it": (StateRowWrittenApart, None, "turn_with_state"),
    "a turn's state row dropped": (StateRowDropped, None, "turn_with_state"),
    "a turn's state row written outside its fence": (
        StateRowOutsideTheFence,
        None,
        "turn_with_state",
    ),
    "a turn's state row written outside its fence (the fencing check)": (
        StateRowOutsideTheFence,
        None,
        "fencing",
    ),
    "a run's end written apart from its last turn": (EndingWrittenApart, None, "turn_with_ending"),
    "a run's end that drops its proof": (EndingDropsTheProof, None, "turn_with_ending"),
    "a run's end written outside its fence": (EndingOutsideTheFence, None, "turn_with_ending"),
    "a run's end written outside its fence (the fencing check)": (
        EndingOutsideTheFence,
        None,
        "fencing",
    ),
}


def test_the_store_bugs_cover_what_the_issue_names() -> None:
    assert len(STORE_BUGS) >= 12, f"expected at least 12 planted store bugs, got {len(STORE_BUGS)}"


@pytest.mark.parametrize("bug", sorted(STORE_BUGS))
async def test_the_store_kit_catches(bug: str) -> None:
    factory, failing, check = STORE_BUGS[bug]
    with pytest.raises(AssertionError) as info:
        await check_store(factory, failing=failing, only=check)
    assert_reported(info.value, "store", check)


async def test_the_memory_store_passes_the_store_kit_with_failures() -> None:
    await check_store(MemoryStore, failing=FailingStore)


async def test_the_sqlite_store_passes_the_store_kit_with_failures(tmp_path: Path) -> None:
    n = iter(range(100))
    await check_store(lambda: SQLiteStore(tmp_path / f"s{next(n)}.db"), failing=broken(tmp_path))


def broken(tmp_path: Path) -> Callable[[], SQLiteStore]:
    """A SQLite store on a file that is not a database: every call fails."""
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"this is not a SQLite file\n" * 200)
    return lambda: SQLiteStore(path)


# -- running one check ------------------------------------------------------------------------


def counting(kind: Callable[[], Any], made: list[str]) -> Callable[[], Any]:
    """A factory of ``kind`` that notes each store it makes (one per check run)."""

    def make() -> Any:
        made.append(kind.__name__)
        return kind()

    return make


async def test_the_store_kit_runs_only_the_checks_it_is_given() -> None:
    made: list[str] = []
    # HistoryNewestFirst's bug is caught by history_round_trip; FailedHistoryReadsEmpty's by
    # failures_raise: neither of them runs.
    await check_store(
        counting(HistoryNewestFirst, made),
        failing=counting(FailedHistoryReadsEmpty, made),
        only="proofs",
    )
    assert made == ["HistoryNewestFirst"]
    made.clear()
    await check_store(counting(RunEventsWaitSleeps, made), only=["lease_queue", "history_by_agent"])
    assert made == ["RunEventsWaitSleeps"] * 2
    # Several run in the kit's order, not the order given: both checks catch this bug.
    with pytest.raises(AssertionError) as info:
        await check_store(HistoryNewestFirst, only=("history_by_agent", "history_round_trip"))
    assert_reported(info.value, "store", "history_round_trip")


async def test_the_store_kit_refuses_a_check_it_has_not() -> None:
    unknown = "store kit: only= selects no check named 'lease_expiri';"
    with pytest.raises(ValueError, match=unknown) as info:
        await check_store(MemoryStore, only=["proofs", "lease_expiri"])
    message = str(info.value)
    assert all(name in message for name in STORE_CHECK_NAMES), message
    with pytest.raises(ValueError, match="selects no check; its checks are: declares_multi"):
        await check_store(MemoryStore, only=[])


async def test_the_failures_check_needs_a_failing_store() -> None:
    with pytest.raises(ValueError, match="the check failures_raise needs failing="):
        await check_store(MemoryStore, only="failures_raise")
    await check_store(MemoryStore, failing=FailingStore, only="failures_raise")
    await check_store(MemoryStore, only="history_round_trip")  # the others need no failing=


# -- leases, fencing, attempts, interrupted runs, counters, cancellation ---------------------------


class LeasesNotExclusive(MemoryStore):
    """Another owner asking for a held lease is told it has it, too."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        grant = await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)
        if not grant.acquired and grant.lease is not None:
            return LeaseGrant(True, attrs.evolve(grant.lease, owner=owner, holder=holder))
        return grant


class RenewalGetsANewToken(MemoryStore):
    """Not reentrant: the holder asking again is granted the lease anew."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        current = self._leases.get(key)
        if current is not None and (current.owner.id, current.holder) == (owner.id, holder):
            del self._leases[key]
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class TokensRestartAfterRelease(MemoryStore):
    """A released key starts its tokens over: a stale writer's token can become valid again."""

    async def release_lease(self, lease: Lease) -> None:
        await super().release_lease(lease)
        if lease.key not in self._leases:
            self._tokens.pop(lease.key, None)


class TakeoverFromLiveOwner(MemoryStore):
    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        current = self._leases.get(key)
        if current is not None and (current.owner.id, current.holder) != (owner.id, holder):
            self._leases[key] = attrs.evolve(current, expires_at=0.0)  # "taken over"
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class TakeoverFromAnotherHost(MemoryStore):
    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        current = self._leases.get(key)
        if current is not None and current.owner.host != owner.host:
            self._leases[key] = attrs.evolve(current, expires_at=0.0)  # "not ours: gone"
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class NoTakeoverAfterExpiry(MemoryStore):
    """Only a provably gone owner's lease is taken over; an expired one never is."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        current = self._read_lease(key, time.time())
        if (
            current is not None
            and current.expired
            and (current.owner.id, current.holder) != (owner.id, holder)
            and not current.owner.provably_gone()
        ):
            return LeaseGrant(False, current)
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class ExpiryNeverReported(MemoryStore):
    async def get_lease(self, key: str) -> Lease | None:
        lease = await super().get_lease(key)
        return attrs.evolve(lease, expired=False) if lease is not None else None


class GoneOwnerNotTakenOver(MemoryStore):
    """Waits for expiry even when the owner's process is known to have exited."""

    @staticmethod
    def _gone(owner: LeaseOwner) -> bool:
        return False


class TakeoverWithoutSayingWhose(MemoryStore):
    async def acquire_lease(self, *args: Any, **kwargs: Any) -> LeaseGrant:
        return attrs.evolve(await super().acquire_lease(*args, **kwargs), took_over_from=None)


class ReleaseByAnyone(MemoryStore):
    async def release_lease(self, lease: Lease) -> None:
        self._leases.pop(lease.key, None)


class RenewsLostLeases(MemoryStore):
    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        now = time.time()
        for lease in leases:  # the bug: whatever the caller says it holds, it now holds
            self._leases[lease.key] = attrs.evolve(lease, renewed_at=now, expires_at=now + ttl)
        return await super().renew_leases(leases, ttl)


class QueueIgnored(MemoryStore):
    """queue=True behaves as no queue: whoever asks first once the lease is free gets it."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        return await super().acquire_lease(key, owner, ttl, holder=holder)


class QueuePlaceLostOnAskingAgain(MemoryStore):
    """A waiter asking again goes to the back of the queue."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        if queue:
            self._leave_queue(key, owner.id, holder)
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class LapsedWaitersKeepTheirPlace(MemoryStore):
    """A waiter that stopped asking is never dropped: ahead counts the dead."""

    def _waiters(self, key: str, now: float) -> list[Any]:
        return self._queues.setdefault(key, [])


class PlainCallersWaitInTheQueue(MemoryStore):
    """Callers without queue are refused while anyone waits."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        waiting = self._waiters(key, time.time())
        if not queue and waiting and (waiting[0].owner_id, waiting[0].holder) != (owner.id, holder):
            return LeaseGrant(False, await self.get_lease(key), None, len(waiting))
        return await super().acquire_lease(key, owner, ttl, holder=holder, queue=queue)


class StartRunIgnoresTheFence(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = await super().start_run(run)
        self._runs[run.run_id] = stored = attrs.evolve(stored, lease_key=fence and fence.key)
        return stored


class RecordTurnIgnoresTheFence(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        await super().record_turn(run, messages, tools)


class RecordTurnWritesToolsBeforeTheFence(MemoryStore):
    """Half a turn: the tool records are stored before the lease is checked."""

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        for record in tools:
            self._tools.setdefault(record.run_id, {})[record.call_id] = record
        await super().record_turn(run, messages, tools, fence)


class FinishRunIgnoresTheFence(MemoryStore):
    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        await super().finish_run(run_id, metadata)


class FinalizeProofIgnoresTheFence(MemoryStore):
    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Any] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        return await super().finalize_proof(run_id, metadata, assertions)


class SaveCheckpointIgnoresTheFence(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        await super().save_checkpoint(checkpoint)


class SaveStateIgnoresTheFence(MemoryStore):
    async def save_state(
        self, key: str, value: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        await super().save_state(key, value)


class FenceChecksTheTokenOnly(MemoryStore):
    """Any owner presenting the right token passes."""

    def _check_fence(self, fence: Lease | None) -> None:
        if fence is not None and fence.key in self._leases:
            fence = attrs.evolve(fence, owner=self._leases[fence.key].owner)
        super()._check_fence(fence)


class FenceRefusesAnExpiredLease(MemoryStore):
    """Too strict: a lease past its expiry fails its writes though nobody took it over."""

    def _check_fence(self, fence: Lease | None) -> None:
        current = self._read_lease(fence.key, time.time()) if fence is not None else None
        if fence is not None and current is not None and current.expired:
            raise LeaseLost(fence.key, fence.token, current)
        super()._check_fence(fence)


class LeaseLostNamesNoCurrentLease(MemoryStore):
    def _check_fence(self, fence: Lease | None) -> None:
        try:
            super()._check_fence(fence)
        except LeaseLost as exc:
            raise LeaseLost(exc.key, exc.token) from None


class AttemptAlwaysOne(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = attrs.evolve(await super().start_run(run, fence), attempt=1)
        self._runs[run.run_id] = stored
        return stored


class RetryMarksNothingInterrupted(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        before = dict(self._reply_metadata)
        stored = await super().start_run(run, fence)
        self._reply_metadata = before
        return stored


class RetryMarksFinishedAttemptsInterrupted(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = await super().start_run(run, fence)
        for n in range(1, stored.attempt):
            self._reply_metadata[(run.run_id, n)] = {"status": "interrupted", "attempt": n}
        return stored


class FinishRunSetsEveryAttempt(MemoryStore):
    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        await super().finish_run(run_id, metadata, fence)
        run = self._runs.get(run_id)
        for n in range(1, (run.attempt if run else 1) + 1):
            self._reply_metadata[(run_id, n)] = dict(metadata)


class EntriesWithoutTheirAttempt(MemoryStore):
    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        await super().record_turn(attrs.evolve(run, attempt=1), messages, tools, fence)


class LeaseKeyNotKept(MemoryStore):
    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = attrs.evolve(await super().start_run(run, fence), lease_key=None)
        self._runs[run.run_id] = stored
        return stored


class RunsNeverInterrupted(MemoryStore):
    def _as_read(self, run: RunRecord, now: float) -> RunRecord:
        return run


class ExpiredRunsStillRunning(MemoryStore):
    def _as_read(self, run: RunRecord, now: float) -> RunRecord:
        lease = self._leases.get(run.lease_key or "")
        if run.status == "running" and lease is not None and lease.holder == run.run_id:
            return run if not lease.owner.provably_gone() else super()._as_read(run, now)
        return super()._as_read(run, now)


class GoneOwnersRunsStillRunning(MemoryStore):
    def _as_read(self, run: RunRecord, now: float) -> RunRecord:
        lease = self._leases.get(run.lease_key or "")
        if run.status == "running" and lease is not None and lease.holder == run.run_id:
            return run if now < lease.expires_at else super()._as_read(run, now)
        return super()._as_read(run, now)


class InterruptedRunsWithoutTheirLease(MemoryStore):
    def _as_read(self, run: RunRecord, now: float) -> RunRecord:
        return attrs.evolve(super()._as_read(run, now), lease=None)


class ListRunsNotReadAsGetRun(MemoryStore):
    async def list_runs(
        self,
        limit: int = 50,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[RunRecord]:
        runs = [
            r
            for r in self._runs.values()
            if (agent_id is None or r.agent_id == agent_id)
            and (principal is EVERY_PRINCIPAL or r.principal == principal)
        ]  # the bug: stored as they are, not read as get_run reads them (interrupted)
        return sorted(runs, key=lambda r: r.started_at, reverse=True)[:limit]


class ListRunsIgnoresThePrincipal(MemoryStore):
    async def list_runs(
        self,
        limit: int = 50,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[RunRecord]:
        return await super().list_runs(limit, agent_id)  # the bug: every principal's runs


class SpendIgnoresTheLimit(MemoryStore):
    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        return await super().spend(key, amount)


class RefusedSpendStillAdds(MemoryStore):
    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        total = await super().spend(key, amount, limit)
        if total is None:
            self._counters[key] = self._counters.get(key, 0.0) + amount
        return total


class GiveBackRefusedOverTheLimit(MemoryStore):
    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        total = self._counters.get(key, 0.0) + amount
        if limit is not None and total > limit:
            return None
        return await super().spend(key, amount)


class RacySpend(MemoryStore):
    """Reads the total, yields, then writes: concurrent spends pass the limit together."""

    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        total = self._counters.get(key, 0.0) + amount
        if limit is not None and amount >= 0 and total > limit:
            return None
        await trio.lowlevel.checkpoint()
        self._counters[key] = total
        return total


class CancelRequestsFromAfterIncluded(MemoryStore):
    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        return [r for _, r in self._cancels if r.id >= after]


class CancelRequestsNewestFirst(MemoryStore):
    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        return list(reversed(await super().cancel_requests(after)))


class RunEventsUnbounded(MemoryStore):
    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> None:
        await super().append_run_events(batches, 1_000_000)  # the bug: keep ignored


class RunEventsNotRestarted(MemoryStore):
    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> None:
        await super().append_run_events([attrs.evolve(b, restart=False) for b in batches], keep)


class RunEventsReplacedByAnotherPrincipal(MemoryStore):
    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> None:
        for batch in batches:
            if batch.restart:  # the bug: a new log replaces the run's, whoever's it was
                self._run_events.pop(batch.run_id, None)
        await super().append_run_events(batches, keep)


class RunEventsFromTheStart(MemoryStore):
    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        return await super().run_events(run_id, 0, limit)  # the bug: `after` ignored


class RunEventsKeptByWholeBatch(MemoryStore):
    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> None:
        # the bug: keep trims whole batches (rows) only, a batch it cuts kept whole
        longest = max((len(b.events) for b in batches), default=0)
        await super().append_run_events(batches, keep + longest)


class RunEventsPagesRepeatTheirLast(MemoryStore):
    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        return await super().run_events(run_id, max(0, after - 1), limit)  # the bug: from after


class RunEventRowsReadWhole(SQLiteStore):
    """The SQLite store (a row holds a batch of a run's events), but a read that starts inside
    a row returns the whole row: the events of the row up to the read's id come again."""

    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            row = conn.execute(
                "SELECT max(id) FROM run_events WHERE run_id = ? AND id <= ? AND last_id > ?",
                (run_id, after, after),
            ).fetchone()
        start = after if row is None or row[0] is None else int(row[0]) - 1  # the bug
        return await super().run_events(run_id, start, limit)


class RunEventsWaitSleeps(MemoryStore):
    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        await trio.sleep(seconds)  # the bug: not woken by an append
        found = await self.run_events(run_id, after)
        return bool(found and found.events)


class StaleRunEventsAccepted(MemoryStore):
    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> list[str]:
        # the bug: a paused owner's events, under a lease its run's next attempt took over,
        # are written into the new attempt's log
        await super().append_run_events([attrs.evolve(b, fence=None) for b in batches], keep)
        return []


class FailedRunEventsReadEmpty(FailingStore):
    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        return None  # the bug: a broken store looks like a run with no events


class FailedAcquireIsARefusal(FailingStore):
    async def acquire_lease(self, *args: Any, **kwargs: Any) -> LeaseGrant:
        return LeaseGrant(False, None)  # the bug: a broken store looks like a busy lease


class FailedSpendIsARefusal(FailingStore):
    async def spend(self, *args: Any, **kwargs: Any) -> float | None:
        return None  # the bug: a broken store looks like a spent budget


class FailedCancelPollIsEmpty(FailingStore):
    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        return []


class FailedReleaseIgnored(FailingStore):
    async def release_lease(self, lease: Lease) -> None:
        return None


class MultiProcessUndeclared(MemoryStore):
    multi_process = None  # type: ignore[assignment]


LEASE_BUGS: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None, str]] = {
    "leases not exclusive": (LeasesNotExclusive, None, "lease_exclusive"),
    "a renewal gets a new token (not reentrant)": (RenewalGetsANewToken, None, "leases"),
    "tokens restart after a release": (TokensRestartAfterRelease, None, "leases"),
    "a live owner's lease taken over": (TakeoverFromLiveOwner, None, "lease_exclusive"),
    "another host's lease taken over": (TakeoverFromAnotherHost, None, "lease_exclusive"),
    "an expired lease never taken over": (NoTakeoverAfterExpiry, None, "lease_expiry"),
    "expiry never reported": (ExpiryNeverReported, None, "lease_expiry"),
    "a provably gone owner's lease not taken over": (GoneOwnerNotTakenOver, None, "leases"),
    "a takeover does not say whose": (TakeoverWithoutSayingWhose, None, "leases"),
    "anyone releases a lease": (ReleaseByAnyone, None, "lease_exclusive"),
    "lost leases renewed": (RenewsLostLeases, None, "lease_exclusive"),
    "the queue ignored": (QueueIgnored, None, "lease_queue"),
    "a waiter asking again loses its place": (QueuePlaceLostOnAskingAgain, None, "lease_queue"),
    "lapsed waiters keep their place": (LapsedWaitersKeepTheirPlace, None, "lease_queue"),
    "callers without queue wait in it": (PlainCallersWaitInTheQueue, None, "lease_queue"),
    "start_run ignores its fence": (StartRunIgnoresTheFence, None, "fencing"),
    "record_turn ignores its fence": (RecordTurnIgnoresTheFence, None, "fencing"),
    "record_turn writes tool records before the fence": (
        RecordTurnWritesToolsBeforeTheFence,
        None,
        "fencing",
    ),
    "finish_run ignores its fence": (FinishRunIgnoresTheFence, None, "fencing"),
    "finalize_proof ignores its fence": (FinalizeProofIgnoresTheFence, None, "fencing"),
    "save_checkpoint ignores its fence": (SaveCheckpointIgnoresTheFence, None, "fencing"),
    "save_state ignores its fence": (SaveStateIgnoresTheFence, None, "lease_expiry"),
    "a fence checks the token only, not the owner": (FenceChecksTheTokenOnly, None, "fencing"),
    "an expired lease whose token holds is refused": (
        FenceRefusesAnExpiredLease,
        None,
        "lease_expiry",
    ),
    "LeaseLost names no current lease": (LeaseLostNamesNoCurrentLease, None, "lease_expiry"),
    "the attempt is always 1": (AttemptAlwaysOne, None, "attempts"),
    "a retry marks nothing interrupted": (RetryMarksNothingInterrupted, None, "attempts"),
    "a retry marks finished attempts interrupted": (
        RetryMarksFinishedAttemptsInterrupted,
        None,
        "attempts",
    ),
    "finish_run sets every attempt's metadata": (FinishRunSetsEveryAttempt, None, "attempts"),
    "entries without their attempt": (EntriesWithoutTheirAttempt, None, "attempts"),
    "the lease key of a run not kept": (LeaseKeyNotKept, None, "metadata_by_run_id"),
    "runs never read as interrupted": (RunsNeverInterrupted, None, "interrupted_runs"),
    "a run whose lease expired reads as running": (
        ExpiredRunsStillRunning,
        None,
        "interrupted_runs",
    ),
    "a run of a gone owner reads as running": (
        GoneOwnersRunsStillRunning,
        None,
        "interrupted_runs",
    ),
    "an interrupted run without its lease": (
        InterruptedRunsWithoutTheirLease,
        None,
        "interrupted_runs",
    ),
    "list_runs not read as get_run": (ListRunsNotReadAsGetRun, None, "interrupted_runs"),
    "list_runs ignores the principal": (ListRunsIgnoresThePrincipal, None, "runs_listing"),
    "spend ignores the limit": (SpendIgnoresTheLimit, None, "counters"),
    "a refused spend still adds": (RefusedSpendStillAdds, None, "counters"),
    "a give-back refused over the limit": (GiveBackRefusedOverTheLimit, None, "counters"),
    "racy concurrent spending": (RacySpend, None, "counters"),
    "cancel_requests includes the request it starts after": (
        CancelRequestsFromAfterIncluded,
        None,
        "cancel_requests",
    ),
    "cancel_requests newest first": (CancelRequestsNewestFirst, None, "cancel_requests"),
    "run events unbounded": (RunEventsUnbounded, None, "run_events"),
    "run events of an earlier attempt kept": (RunEventsNotRestarted, None, "run_events"),
    "run events read from the start": (RunEventsFromTheStart, None, "run_events"),
    "run events kept by whole batch": (RunEventsKeptByWholeBatch, None, "run_events_resumed"),
    "run event pages repeat their last": (
        RunEventsPagesRepeatTheirLast,
        None,
        "run_events_resumed",
    ),
    "run events replaced by another principal's": (
        RunEventsReplacedByAnotherPrincipal,
        None,
        "run_events",
    ),
    "a waiter for run events not woken": (RunEventsWaitSleeps, None, "run_events"),
    "a taken-over owner's run events accepted": (
        StaleRunEventsAccepted,
        None,
        "run_events_fenced",
    ),
    "a failed run events read is empty": (MemoryStore, FailedRunEventsReadEmpty, "failures_raise"),
    "a failed acquire_lease is a refusal": (MemoryStore, FailedAcquireIsARefusal, "failures_raise"),
    "a failed spend is a refusal": (MemoryStore, FailedSpendIsARefusal, "failures_raise"),
    "a failed cancel poll is empty": (MemoryStore, FailedCancelPollIsEmpty, "failures_raise"),
    "a failed release is ignored": (MemoryStore, FailedReleaseIgnored, "failures_raise"),
    "multi_process undeclared": (MultiProcessUndeclared, None, "declares_multi_process"),
}


def test_the_lease_bugs_are_many() -> None:
    assert len(LEASE_BUGS) >= 12, f"expected at least 12 planted lease bugs, got {len(LEASE_BUGS)}"


# Bugs that make their check wait out its timeouts, on Trio's clock: their check reads no wall
# clock, so they run on virtual time (pytest-trio runs a test on the Clock among its arguments).
VIRTUAL_TIME = {"a waiter for run events not woken"}


@pytest.fixture
def clock(bug: str) -> trio.testing.MockClock | None:
    return trio.testing.MockClock(autojump_threshold=0) if bug in VIRTUAL_TIME else None


@pytest.mark.parametrize("bug", sorted(LEASE_BUGS))
async def test_the_store_kit_catches_the_lease_bug(
    bug: str, clock: trio.testing.MockClock | None
) -> None:
    factory, failing, check = LEASE_BUGS[bug]
    with pytest.raises(AssertionError) as info:
        await check_store(factory, failing=failing, only=check)
    assert_reported(info.value, "store", check)


async def test_the_store_kit_catches_a_store_that_reads_a_whole_row_from_inside_it(
    tmp_path: Path,
) -> None:
    n = iter(range(100))
    with pytest.raises(AssertionError) as info:
        await check_store(
            lambda: RunEventRowsReadWhole(tmp_path / f"w{next(n)}.db"), only="run_events_resumed"
        )
    assert_reported(info.value, "store", "run_events_resumed")
    assert "run_events(after 1)" in str(info.value), "the first read from inside a row"


# -- stores shared by several processes -----------------------------------------------------------


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock of ``path`` among processes (released when the file closes)."""
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class PickledStore:
    """A reference store for several processes: a MemoryStore (or a planted subclass, named by
    ``kind``) pickled in one file, each call made under an exclusive lock of the file."""

    multi_process = True

    def __init__(self, path: str, kind: str = "MemoryStore") -> None:
        self.path = Path(path)
        self.kind: type[MemoryStore] = globals()[kind]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.kind, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            with locked(self.path):
                try:
                    state = pickle.loads(self.path.read_bytes())
                except FileNotFoundError:
                    state = self.kind()
                result = await method(state, *args, **kwargs)
                scratch = self.path.with_suffix(f".{os.getpid()}")
                scratch.write_bytes(pickle.dumps(state))
                scratch.replace(self.path)
                return result

        return call

    # Waits poll: a call holds the file's lock, so a waiter inside one would block every writer.
    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            while True:
                found = await self.run_events(run_id, after)
                if found is not None and found.events:
                    return True
                await trio.sleep(0.05)
        return False

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        await trio.sleep(min(seconds, 0.05))


class OneProcessClaimingMany(MemoryStore):
    """Says it may be shared by processes; each process has dictionaries of its own."""

    multi_process = True


PROCESS_BUGS = {
    "a one-process store claiming multi_process": (
        "OneProcessClaimingMany",
        "exclusive",
    ),
    "a live holder's lease taken over": ("TakeoverFromLiveOwner", "exclusive"),
    "an expired lease of a stopped process never taken over": (
        "NoTakeoverAfterExpiry",
        "expiry_takeover",
    ),
    "a stale writer's fenced writes accepted": ("RecordTurnIgnoresTheFence", "stale_writer_fenced"),
    "a killed holder's lease waits for its expiry": ("GoneOwnerNotTakenOver", "kill_takeover"),
    "a refused spend still adds, across processes": ("RefusedSpendStillAdds", "counters"),
}


@pytest.mark.processes
async def test_the_reference_multi_process_store_passes_the_process_kit(tmp_path: Path) -> None:
    result = await check_store_processes(f"{__name__}:PickledStore", str(tmp_path / "store.pickle"))
    assert (result.skipped, result.not_run, len(result.passed)) == (None, (), 10)


@pytest.mark.processes
@pytest.mark.parametrize("bug", sorted(PROCESS_BUGS))
async def test_the_process_kit_catches(bug: str, tmp_path: Path) -> None:
    kind, check = PROCESS_BUGS[bug]
    if kind == "OneProcessClaimingMany":
        args: tuple[str, ...] = ()
        opener = f"{__name__}:OneProcessClaimingMany"
    else:
        args, opener = (str(tmp_path / "store.pickle"), kind), f"{__name__}:PickledStore"
    with pytest.raises(AssertionError) as info:
        await check_store_processes(opener, *args, only=check)
    assert_reported(info.value, "store processes", check)


async def test_the_process_kit_runs_only_the_checks_it_is_given(tmp_path: Path) -> None:
    """A store whose one bug is in the counters check passes another; the result names the
    checks run, and no other."""
    opener, path = f"{__name__}:PickledStore", str(tmp_path / "store.pickle")
    result = await check_store_processes(
        opener, path, "RefusedSpendStillAdds", only="cancel_requests"
    )
    assert (result.passed, result.not_run, result.skipped) == (("cancel_requests",), (), None)


async def test_the_process_kit_refuses_a_check_it_has_not() -> None:
    # Refused before the store is opened: this opener does not exist.
    unknown = "store processes kit: only= selects no check named 'lease_expiry';"
    with pytest.raises(ValueError, match=unknown) as info:
        await check_store_processes("no_such_module:nothing", only=["counters", "lease_expiry"])
    message = str(info.value)
    assert all(name in message for name in PROCESS_CHECK_NAMES), message


def test_a_skipped_store_is_skipped_whatever_checks_are_asked_for() -> None:
    result = trio.run(
        functools.partial(
            check_store_processes, "soulacy.plugins.memory_store:MemoryStore", only="counters"
        )
    )
    assert result.passed == ()
    assert result.skipped is not None
    assert "multi_process = False" in result.skipped


# -- checkpoint stores ----------------------------------------------------------------------------


class FailedCheckpointReadIsEmpty(FailingStore):
    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return []  # the bug: a workflow would start over, redoing completed steps


class FailedCheckpointWriteIgnored(FailingStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        return None


class CheckpointsByStepId(MemoryStore):
    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return sorted(await super().load_checkpoints(run_id), key=lambda c: c.step_id)


class CheckpointsByLastSave(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        self._checkpoints.setdefault(checkpoint.run_id, {}).pop(checkpoint.step_id, None)
        await super().save_checkpoint(checkpoint)


class CheckpointSaveAppends(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self._saved: list[Checkpoint] = []

    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        self._saved.append(checkpoint)

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return [c for c in self._saved if c.run_id == run_id]


class CheckpointIdentityDropped(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        await super().save_checkpoint(attrs.evolve(checkpoint, identity=None))


class LegacyIdentityBecomesEmpty(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        await super().save_checkpoint(attrs.evolve(checkpoint, identity=checkpoint.identity or {}))


class CheckpointEvidenceDropped(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        await super().save_checkpoint(attrs.evolve(checkpoint, evidence=None))


class CheckpointsOfEveryRun(MemoryStore):
    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return [c for steps in self._checkpoints.values() for c in steps.values()]


class DiscardStepDiscardsRun(MemoryStore):
    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        return await super().discard_checkpoints(run_id)


class DiscardRunDiscardsEveryRun(MemoryStore):
    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        if step_id is not None:
            return await super().discard_checkpoints(run_id, step_id)
        count = sum(len(steps) for steps in self._checkpoints.values())
        self._checkpoints.clear()
        return count


class StateFirstSaveWins(MemoryStore):
    async def save_state(
        self, key: str, value: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        if key not in self._state:
            await super().save_state(key, value)


class StateByReference(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self._values: dict[str, Mapping[str, Any]] = {}

    async def save_state(
        self, key: str, value: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        self._values[key] = value

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        return self._values.get(key)


CHECKPOINT_BUGS: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None, str]] = {
    "a failed read of checkpoints returns []": (
        MemoryStore,
        FailedCheckpointReadIsEmpty,
        "checkpoint_failures_raise",
    ),
    "a failed checkpoint write is ignored": (
        MemoryStore,
        FailedCheckpointWriteIgnored,
        "checkpoint_failures_raise",
    ),
    "checkpoints in step id order": (CheckpointsByStepId, None, "checkpoints"),
    "checkpoints in order of last save": (CheckpointsByLastSave, None, "checkpoints"),
    "a save appends instead of replacing": (CheckpointSaveAppends, None, "checkpoints"),
    "identity dropped": (CheckpointIdentityDropped, None, "checkpoints"),
    "a legacy checkpoint gains an identity": (LegacyIdentityBecomesEmpty, None, "checkpoints"),
    "evidence dropped": (CheckpointEvidenceDropped, None, "checkpoints"),
    "checkpoints of every run": (CheckpointsOfEveryRun, None, "checkpoints"),
    "discarding a step discards the run": (DiscardStepDiscardsRun, None, "checkpoints"),
    "discarding a run discards every run": (DiscardRunDiscardsEveryRun, None, "checkpoints"),
    "state: the first save wins": (StateFirstSaveWins, None, "state"),
    "state kept by reference": (StateByReference, None, "state"),
}


@pytest.mark.parametrize("bug", sorted(CHECKPOINT_BUGS))
async def test_the_checkpoint_store_kit_catches(bug: str) -> None:
    factory, failing, check = CHECKPOINT_BUGS[bug]
    with pytest.raises(AssertionError) as info:
        await check_checkpoint_store(factory, failing=failing, only=check)
    assert_reported(info.value, "checkpoint store", check)


@pytest.mark.parametrize("bug", sorted(CHECKPOINT_BUGS))
async def test_the_store_kit_catches_the_checkpoint_bug(bug: str) -> None:
    """One store plays every role: check_store runs the checkpoint checks too."""
    factory, failing, check = CHECKPOINT_BUGS[bug]
    check = check.replace("checkpoint_failures_raise", "failures_raise")
    with pytest.raises(AssertionError) as info:
        await check_store(factory, failing=failing, only=check)
    assert_reported(info.value, "store", check)


async def test_the_memory_store_passes_the_checkpoint_kit_with_failures() -> None:
    await check_checkpoint_store(MemoryStore, failing=FailingStore)


async def test_the_sqlite_store_passes_the_checkpoint_kit_with_failures(tmp_path: Path) -> None:
    n = iter(range(100))
    await check_checkpoint_store(
        lambda: SQLiteStore(tmp_path / f"c{next(n)}.db"), failing=broken(tmp_path)
    )


async def test_the_checkpoint_kit_runs_only_the_checks_it_is_given() -> None:
    made: list[str] = []
    await check_checkpoint_store(
        counting(StateFirstSaveWins, made),
        failing=counting(FailedCheckpointReadIsEmpty, made),
        only="checkpoints",
    )
    assert made == ["StateFirstSaveWins"]


async def test_the_checkpoint_kit_refuses_a_check_it_has_not() -> None:
    unknown = "checkpoint store kit: only= selects no check named 'failures_raise';"
    with pytest.raises(ValueError, match=unknown) as info:
        await check_checkpoint_store(MemoryStore, only="failures_raise")  # the store kit's name
    message = str(info.value)
    assert all(name in message for name in CHECKPOINT_CHECK_NAMES), message
    with pytest.raises(ValueError, match="checkpoint_failures_raise needs failing="):
        await check_checkpoint_store(MemoryStore, only="checkpoint_failures_raise")


# -- progress detectors ---------------------------------------------------------------------------


class PlantedDetector:
    """A reference detector (a fresh result is one not seen before in this run; ``limit``
    results in a row without a fresh one stall) with one bug switched on."""

    shared: Counter[Any] = Counter()  # used only by the "shared state" bug

    def __init__(self, limit: int | None, bug: str) -> None:
        self.limit, self.bug = limit, bug
        self.seen: Counter[Any] = PlantedDetector.shared if bug == "shared" else Counter()
        self.streak = 0
        self.last: Any = None
        self.last_call: Any = None

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict:
        key: Any = (is_error, json.dumps(result, sort_keys=True, default=str))
        call = (tool, json.dumps(arguments, sort_keys=True), key)
        repeated_call, self.last_call = call == self.last_call, call
        if self.bug == "arguments":
            key = (key, call[1])
        fresh = self.seen[key] == 0
        if self.bug == "consecutive":
            fresh = key != self.last
        if self.bug == "errors" and is_error:
            fresh = True
        self.seen[key] += 1
        self.last = key
        if self.bug == "two identical calls" and repeated_call:
            return Verdict("stalled", None, {"reason": "no_progress"})
        if fresh and not (self.bug == "no reset" and self.streak):
            self.streak = 1
            return Verdict("progress")
        self.streak += 1
        limit = self.limit
        if self.bug == "none stalls" and limit is None and repeated_call and self.streak >= 3:
            return Verdict("stalled", None, {"reason": "no_progress"})  # "None: a default of 3"
        if self.bug == "crash on none":
            limit = self.limit + 0  # type: ignore[operator]
        if limit is None or self.bug == "never":
            return Verdict("repeated")
        limit += {"early": -1, "late": 1}.get(self.bug, 0)
        if self.streak >= limit:
            kind = "stuck" if self.bug == "unknown verdict" else "stalled"
            return Verdict(kind, None, {"reason": "no_progress"})  # type: ignore[arg-type]
        return Verdict("repeated")


PROGRESS_BUGS = {
    "stalls after 2 identical calls": ("two identical calls", "limit"),
    "stalls when the limit is None": ("none stalls", "disabled"),
    "crashes when the limit is None": ("crash on none", "disabled"),
    "never stalls": ("never", "limit"),
    "stalls one result early": ("early", "limit"),
    "stalls one result late": ("late", "limit"),
    "a fresh result does not reset the count": ("no reset", "fresh"),
    "changed arguments count as progress": ("arguments", "limit"),
    "only consecutive repeats count": ("consecutive", "alternation"),
    "an error is always fresh": ("errors", "errors"),
    "detectors share their state": ("shared", "fresh"),
    "a verdict of an unknown kind": ("unknown verdict", "limit"),
}


def test_the_reference_detector_passes_the_progress_kit() -> None:
    check_progress_detector(lambda limit: PlantedDetector(limit, "none"))


@pytest.mark.parametrize("bug", sorted(PROGRESS_BUGS))
def test_the_progress_kit_catches(bug: str) -> None:
    switch, check = PROGRESS_BUGS[bug]
    PlantedDetector.shared.clear()
    with pytest.raises(AssertionError) as info:
        check_progress_detector(lambda limit: PlantedDetector(limit, switch), only=check)
    assert_reported(info.value, "progress detector", check)


def test_the_signature_detector_passes_the_stricter_progress_kit() -> None:
    check_progress_detector(lambda limit: SignatureDetector(limit, 30, ["timestamp"]))


def test_the_progress_kit_runs_only_the_checks_it_is_given() -> None:
    made: list[int | None] = []

    def make(limit: int | None) -> PlantedDetector:
        made.append(limit)
        return PlantedDetector(limit, "never")  # caught by the limit check only

    check_progress_detector(make, only="disabled")
    assert set(made) == {None}, made
    unknown = "progress detector kit: only= selects no check named 'stalls';"
    with pytest.raises(ValueError, match=unknown) as info:
        check_progress_detector(make, only="stalls")
    message = str(info.value)
    assert all(name in message for name in PROGRESS_CHECK_NAMES), message


# -- transports -----------------------------------------------------------------------------------


@attrs.define
class PlantedTransport:
    """A reference /api/v1 (one scripted answer, an SSE log per run) with one bug switched on."""

    bug: str = "none"
    runs: dict[str, list[tuple[str, str, str]]] = attrs.Factory(dict)

    def result(self, run_id: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "reply": "hello",
            "run_id": run_id,
            "session_id": "s",
            "status": "completed",
            "verification": "unverified",
            "metadata": {},
        }
        if self.bug == "no metadata":
            del body["metadata"]
        if self.bug == "result without run id":
            body.pop("run_id")
        return body

    def events(self, run_id: str) -> list[tuple[str, str, str]]:
        events = [
            (f"{run_id}-1", "run.started", "{}"),
            (f"{run_id}-2", "text", json.dumps({"text": "hello"})),
            (f"{run_id}-3", "result", json.dumps(self.result(run_id))),
        ]
        if self.bug == "no final result":
            events.pop()
        return events

    @staticmethod
    def sse(events: Sequence[tuple[str, str, str]], ids: bool = True) -> bytes:
        out = [(f"id: {i}\n" if ids else "") + f"event: {e}\ndata: {d}\n\n" for i, e, d in events]
        return "".join(out).encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        path, method = scope["path"], scope["method"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, kind, body = 404, "application/json", b'{"error": "not found"}'
        if path == "/api/v1/health" and method == "GET":
            status, body = (500 if self.bug == "health fails" else 200), b"{}"
        elif path in ("/api/v1/chat", "/api/v1/chat/stream") and method == "POST":
            run_id = f"run{len(self.runs) + 1}"
            self.runs[run_id] = self.events(run_id)
            if path.endswith("stream"):
                status, kind = 200, "text/event-stream"
                body = self.sse(self.runs[run_id], ids=self.bug != "no event ids")
            else:
                status, body = 200, json.dumps(self.result(run_id)).encode()
        elif path.startswith("/api/v1/runs/") and path.endswith("/events"):
            run_id = path.split("/")[4]
            if run_id in self.runs:
                events = self.runs[run_id]
                last = headers.get("last-event-id")
                if last and self.bug != "last event id ignored":
                    events = events[[e[0] for e in events].index(last) + 1 :]
                status, kind, body = 200, "text/event-stream", self.sse(events)
        elif path.startswith("/api/v1/runs/") and self.bug == "unknown run found":
            status, body = 200, b"{}"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", kind.encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


TRANSPORT_BUGS = (
    "health fails",
    "no metadata",
    "no event ids",
    "no final result",
    "result without run id",
    "last event id ignored",
    "unknown run found",
)


@pytest.fixture
async def planted_url(nursery: trio.Nursery) -> AsyncIterator[Callable[[str], Any]]:
    stops: list[trio.Event] = []

    async def serve(bug: str) -> str:
        url, stop = await serve_asgi(nursery, PlantedTransport(bug))
        stops.append(stop)
        return str(url)

    yield serve
    for stop in stops:
        stop.set()


async def test_the_reference_transport_passes_the_transport_kit(
    planted_url: Callable[[str], Any],
) -> None:
    await check_http_api(await planted_url("none"), "echo")


@pytest.mark.parametrize("bug", TRANSPORT_BUGS)
async def test_the_transport_kit_catches(bug: str, planted_url: Callable[[str], Any]) -> None:
    url = await planted_url(bug)
    with pytest.raises(AssertionError) as info:
        await check_http_api(url, "echo")
    message = str(info.value)
    assert message.startswith("transport check: "), f"expected the kit's name, got {message!r}"
    assert re.search(r": expected \S.*, got \S", message), (
        f"expected 'expected <E>, got <G>' in the failure, got {message!r}"
    )
