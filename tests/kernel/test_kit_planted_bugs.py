"""Each conformance kit is proven by planted bugs: every one is caught, with a message that
names the check and says what was expected and what came back.

Every planted implementation is the right one (MemoryStore, a small reference detector, a
reference transport) with one thing wrong.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel
from _support.openai_server import serve_asgi

from soulacy.kernel.contracts import Verdict
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    Checkpoint,
    Claim,
    ClaimOwner,
    EveryPrincipal,
    HistoryEntry,
    ProofRecord,
    RunRecord,
    StorageError,
    ToolRecord,
    canonical_json,
    make_proof,
)
from soulacy.kernel.testing import (
    check_checkpoint_store,
    check_progress_detector,
    check_store,
    check_transport,
)
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.progress import SignatureDetector
from soulacy.plugins.sqlite_store import SQLiteStore

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
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        plain = [attrs.evolve(m, tool_calls=()) for m in messages]
        await super().record_turn(run, plain, tools)


class LoadHistoryIgnoresPrincipal(MemoryStore):
    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        entries = [
            e
            for key, entries in self._by_conversation.items()
            if (key.agent_id, key.session_id, key.user_id) == (agent_id, session_id, user_id)
            for e in entries
        ]
        return [e.message() for e in sorted(entries, key=lambda e: e.id)]


class LoadHistoryIgnoresUser(MemoryStore):
    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        entries = [
            e
            for key, entries in self._by_conversation.items()
            if (key.agent_id, key.session_id, key.principal) == (agent_id, session_id, principal)
            for e in entries
        ]
        return [e.message() for e in entries]


class LoadHistoryNewestFirst(MemoryStore):
    async def load_history(self, *args: Any, **kwargs: Any) -> list[Message]:
        return list(reversed(await super().load_history(*args, **kwargs)))


class FinishRunTouchesOtherRuns(MemoryStore):
    """Metadata set by session, not by run id: every run of the session gets it."""

    async def finish_run(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        await super().finish_run(run_id, metadata)
        session = self._runs[run_id].session_id
        for other in self._runs.values():
            if other.session_id == session:
                self._run_metadata[other.run_id] = dict(metadata)


class FinishRunLeavesRunRunning(MemoryStore):
    async def finish_run(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        self._run_metadata[run_id] = dict(metadata)


class GetRunRaisesForUnknown(MemoryStore):
    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs[run_id]


class ListRunsOldestFirst(MemoryStore):
    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        runs = [r for r in self._runs.values() if agent_id is None or r.agent_id == agent_id]
        return sorted(runs, key=lambda r: r.started_at)[:limit]


class ListRunsIgnoresAgent(MemoryStore):
    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        return await super().list_runs(limit)


class ToolRecordsLost(MemoryStore):
    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        await super().record_turn(run, messages, [])


class ToolRecordsOfLastTurnOnly(MemoryStore):
    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        self._tools.pop(run.run_id, None)
        await super().record_turn(run, messages, tools)


class ToolErrorsLost(MemoryStore):
    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        await super().record_turn(run, messages, [attrs.evolve(t, is_error=False) for t in tools])


class ToolRecordsByCallIdOnly(MemoryStore):
    """Call ids are unique per run only; this store keys them across runs."""

    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        await super().record_turn(run, messages, tools)
        for record in tools:
            for records in self._tools.values():
                if record.call_id in records:
                    records[record.call_id] = record


class CappedReceipts(MemoryStore):
    """The original system's bug: a proof keeps at most 1024 receipts."""

    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Any] = ()
    ) -> ProofRecord:
        if run_id not in self._proofs:
            records = list(self._tools.get(run_id, {}).values())[:1024]
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]


class UnboundedReceipts(MemoryStore):
    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Any] = ()
    ) -> ProofRecord:
        if run_id not in self._proofs:
            records = self._tools.get(run_id, {}).values()
            receipts = [{"call_id": r.call_id, "result": r.content} for r in records]
            body = canonical_json({"status": metadata.get("status"), "receipts": receipts})
            sha = hashlib.sha256(body.encode()).hexdigest()
            self._proofs[run_id] = ProofRecord(run_id, sha, body, len(receipts))
        return self._proofs[run_id]


class ProofHashOfSomethingElse(MemoryStore):
    async def finalize_proof(self, *args: Any, **kwargs: Any) -> ProofRecord:
        proof = await super().finalize_proof(*args, **kwargs)
        return attrs.evolve(proof, sha256=hashlib.sha256(b"x" + proof.body.encode()).hexdigest())


class ProofNotFinal(MemoryStore):
    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Any] = ()
    ) -> ProofRecord:
        self._proofs.pop(run_id, None)
        return await super().finalize_proof(run_id, metadata, assertions)


class RetryKeepsOldProof(MemoryStore):
    async def start_run(self, run: RunRecord) -> None:
        self._runs[run.run_id] = run


class RacyFinalization(MemoryStore):
    """Checks for a stored proof, yields, then stores its own: concurrent callers disagree."""

    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Any] = ()
    ) -> ProofRecord:
        if run_id not in self._proofs:
            records = list(self._tools.get(run_id, {}).values())
            await trio.lowlevel.checkpoint()
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]


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
    "proof hash of something else": (ProofHashOfSomethingElse, None, "proofs"),
    "a proof is not final": (ProofNotFinal, None, "proofs"),
    "a retry keeps the old proof": (RetryKeepsOldProof, None, "proofs"),
    "racy concurrent finalization": (RacyFinalization, None, "concurrent_finalization"),
    "a failed history read is empty": (MemoryStore, FailedHistoryReadsEmpty, "failures_raise"),
}


def test_the_store_bugs_cover_what_the_issue_names() -> None:
    assert len(STORE_BUGS) >= 12, f"expected at least 12 planted store bugs, got {len(STORE_BUGS)}"


@pytest.mark.parametrize("bug", sorted(STORE_BUGS))
async def test_the_store_kit_catches(bug: str) -> None:
    factory, failing, check = STORE_BUGS[bug]
    with pytest.raises(AssertionError) as info:
        await check_store(factory, **({"failing": failing} if failing else {}))
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


# -- checkpoint stores ----------------------------------------------------------------------------


class FailedCheckpointReadIsEmpty(FailingStore):
    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return []  # the bug: a workflow would start over, redoing completed steps


class FailedCheckpointWriteIgnored(FailingStore):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        return None


class CheckpointsByStepId(MemoryStore):
    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return sorted(await super().load_checkpoints(run_id), key=lambda c: c.step_id)


class CheckpointsByLastSave(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoints.setdefault(checkpoint.run_id, {}).pop(checkpoint.step_id, None)
        await super().save_checkpoint(checkpoint)


class CheckpointSaveAppends(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self._saved: list[Checkpoint] = []

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._saved.append(checkpoint)

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return [c for c in self._saved if c.run_id == run_id]


class CheckpointIdentityDropped(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        await super().save_checkpoint(attrs.evolve(checkpoint, identity=None))


class LegacyIdentityBecomesEmpty(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        await super().save_checkpoint(attrs.evolve(checkpoint, identity=checkpoint.identity or {}))


class CheckpointEvidenceDropped(MemoryStore):
    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
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


class ClaimsNotExclusive(MemoryStore):
    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        self._claims[key] = owner
        return Claim(key, True, owner)


class ClaimsNotReentrant(MemoryStore):
    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        holder = self._claims.get(key)
        if holder is not None and not holder.provably_gone():
            return Claim(key, False, holder)
        return await super().try_claim(key, owner)


class TakeoverFromLiveOwner(MemoryStore):
    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        holder = self._claims.get(key)
        self._claims[key] = owner  # any holder is taken over, gone or not
        return Claim(key, True, owner, holder if holder != owner else None)


class TakeoverFromAnotherHost(MemoryStore):
    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        holder = self._claims.get(key)
        if holder is not None and holder.host != owner.host:
            self._claims[key] = owner  # "not ours: gone"
            return Claim(key, True, owner, holder)
        return await super().try_claim(key, owner)


class TakeoverWithoutSayingWhose(MemoryStore):
    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        return attrs.evolve(await super().try_claim(key, owner), took_over_from=None)


class ReleaseByAnyone(MemoryStore):
    async def release_claim(self, key: str, owner: ClaimOwner) -> None:
        self._claims.pop(key, None)


class ClaimHolderForgets(MemoryStore):
    async def claim_holder(self, key: str) -> ClaimOwner | None:
        return None


class StateFirstSaveWins(MemoryStore):
    async def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        if key not in self._state:
            await super().save_state(key, value)


class StateByReference(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self._values: dict[str, Mapping[str, Any]] = {}

    async def save_state(self, key: str, value: Mapping[str, Any]) -> None:
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
    "claims not exclusive": (ClaimsNotExclusive, None, "claims"),
    "claims not reentrant": (ClaimsNotReentrant, None, "claims"),
    "a live owner's claim taken over": (TakeoverFromLiveOwner, None, "claims"),
    "another host's claim taken over": (TakeoverFromAnotherHost, None, "claims"),
    "a takeover does not say whose": (TakeoverWithoutSayingWhose, None, "claims"),
    "anyone releases a claim": (ReleaseByAnyone, None, "claims"),
    "claim_holder forgets": (ClaimHolderForgets, None, "claims"),
    "state: the first save wins": (StateFirstSaveWins, None, "state"),
    "state kept by reference": (StateByReference, None, "state"),
}


@pytest.mark.parametrize("bug", sorted(CHECKPOINT_BUGS))
async def test_the_checkpoint_store_kit_catches(bug: str) -> None:
    factory, failing, check = CHECKPOINT_BUGS[bug]
    with pytest.raises(AssertionError) as info:
        await check_checkpoint_store(factory, **({"failing": failing} if failing else {}))
    assert_reported(info.value, "checkpoint store", check)


async def test_the_memory_store_passes_the_checkpoint_kit_with_failures() -> None:
    await check_checkpoint_store(MemoryStore, failing=FailingStore)


async def test_the_sqlite_store_passes_the_checkpoint_kit_with_failures(tmp_path: Path) -> None:
    n = iter(range(100))
    await check_checkpoint_store(
        lambda: SQLiteStore(tmp_path / f"c{next(n)}.db"), failing=broken(tmp_path)
    )


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
        check_progress_detector(lambda limit: PlantedDetector(limit, switch))
    assert_reported(info.value, "progress detector", check)


def test_the_signature_detector_passes_the_stricter_progress_kit() -> None:
    check_progress_detector(lambda limit: SignatureDetector(limit, 30, ["timestamp"]))


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
    await check_transport(await planted_url("none"), "echo")


@pytest.mark.parametrize("bug", TRANSPORT_BUGS)
async def test_the_transport_kit_catches(bug: str, planted_url: Callable[[str], Any]) -> None:
    url = await planted_url(bug)
    with pytest.raises(AssertionError) as info:
        await check_transport(url, "echo")
    message = str(info.value)
    assert message.startswith("transport check: "), f"expected the kit's name, got {message!r}"
    assert re.search(r": expected \S.*, got \S", message), (
        f"expected 'expected <E>, got <G>' in the failure, got {message!r}"
    )
