"""The in-memory store: the whole store contract, kept in dictionaries of one process.

Every method does its work without awaiting anything, so each call is atomic with respect to
every other task of the process: a fenced write checks its lease and writes in one step, as a
durable store does in one transaction. Time is ``time.time()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import trio

from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    CancelRequest,
    Checkpoint,
    ConversationKey,
    Ending,
    EveryPrincipal,
    HistoryEntry,
    Lease,
    LeaseGrant,
    LeaseLost,
    LeaseOwner,
    ProofRecord,
    RunEvent,
    RunEventBatch,
    RunEvents,
    RunIdTaken,
    RunRecord,
    StateRow,
    ToolRecord,
    canonical_json,
    identity_differs,
    run_as_read,
)
from soulacy.plugins.proofkit import make_proof

CANCEL_REQUESTS_KEPT = 3600.0  # seconds a cancellation request is kept
RUN_EVENTS_KEPT = 86400.0  # seconds a run's stream events are kept after its last one


@attrs.define
class _Waiter:
    """A caller waiting for a lease in its queue: it keeps its place while it asks again
    within ``ttl`` of its last asking."""

    owner_id: str
    holder: str
    asked_at: float
    ttl: float

    def live(self, now: float) -> bool:
        return now < self.asked_at + self.ttl


_Recorded = tuple[int, str, int, float, Message]  # entry id, run id, attempt, time, message


def _stored(message: Message) -> Message:
    """A message as a store gives it back: without ``meta``, which no store keeps."""
    if not message.meta:
        return message  # frozen: the recorded object itself is what a copy would be
    return Message(
        message.role,
        message.content,
        message.tool_calls,
        message.tool_call_id,
        message.name,
        message.is_error,
    )


def _entry(
    key: ConversationKey, recorded: _Recorded, metadata: Mapping[str, Any] | None
) -> HistoryEntry:
    entry_id, run_id, attempt, created_at, m = recorded
    return HistoryEntry(
        entry_id,
        key.agent_id,
        key.session_id,
        run_id,
        m.role,
        m.content,
        None,
        created_at,
        metadata,
        m.tool_call_id,
        [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in m.tool_calls],
        m.name,
        m.is_error,
        key.principal,
        key.user_id,
        attempt,
    )


class MemoryStore:
    """Everything in memory: for tests, demos and ``--no-store`` runs; gone with the process."""

    multi_process: ClassVar[bool] = False  # another process cannot see these dictionaries

    def __init__(self) -> None:
        self._last_entry = 0  # the id of the last history entry
        # A conversation's messages as they were recorded, each with its entry id, run, attempt
        # and time: one tuple a message (a long run keeps few objects for the collector to
        # walk), made into HistoryEntry objects when history is read.
        self._by_conversation: dict[ConversationKey, list[_Recorded]] = {}
        self._runs: dict[str, RunRecord] = {}
        # A running run's conversation list, with the record its turns are recorded under:
        # found by run id instead of a ConversationKey made (and hashed) every turn. Dropped
        # at its finish; another record under the same id (a retry) looks it up again.
        self._writing: dict[str, tuple[RunRecord, list[_Recorded]]] = {}
        self._tools: dict[str, dict[str, ToolRecord]] = {}
        self._proofs: dict[str, ProofRecord] = {}
        # reply metadata by (run id, attempt): each attempt's entries get their own
        self._reply_metadata: dict[tuple[str, int], dict[str, Any]] = {}
        self._checkpoints: dict[str, dict[str, Checkpoint]] = {}
        self.superseded_proofs: list[ProofRecord] = []
        self._state: dict[str, str] = {}
        self._leases: dict[str, Lease] = {}  # stored with expired=False; judged on reading
        self._tokens: dict[str, int] = {}  # the last token granted per key, released or not
        self._queues: dict[str, list[_Waiter]] = {}
        self._cancels: list[tuple[float, CancelRequest]] = []
        self._last_cancel_id = 0
        self._counters: dict[str, float] = {}
        self._approvals: dict[tuple[str, str], ApprovalRequest] = {}  # in request order
        # run id -> (principal, its events in id order, when the last was appended, the
        # token of the lease its newest events were written under: None when not fenced)
        self._run_events: dict[str, tuple[str | None, list[RunEvent], float, int | None]] = {}
        # run id -> (lease key, token) its current attempt was started under
        self._run_fences: dict[str, tuple[str, int]] = {}
        self._appended = trio.Event()  # set, and replaced, on every append or cancel request

    # -- leases --------------------------------------------------------------------------------

    @staticmethod
    def _now() -> float:
        return time.time()

    def _read_lease(self, key: str, now: float) -> Lease | None:
        lease = self._leases.get(key)
        if lease is None:
            return None
        return attrs.evolve(lease, expired=now >= lease.expires_at)

    @staticmethod
    def _gone(owner: LeaseOwner) -> bool:
        """Whether the owner of a lease is provably gone: its lease is taken over at once."""
        return owner.provably_gone()

    def _check_fence(self, fence: Lease | None) -> None:
        """Raise LeaseLost unless ``fence`` still holds: same token and same owner."""
        if fence is None:
            return
        current = self._leases.get(fence.key)
        if current is None or current.token != fence.token or current.owner.id != fence.owner.id:
            raise LeaseLost(fence.key, fence.token, self._read_lease(fence.key, self._now()))

    def _waiters(self, key: str, now: float) -> list[_Waiter]:
        """The live waiters of ``key``, in arrival order (the lapsed ones leave)."""
        queue = [w for w in self._queues.get(key, ()) if w.live(now)]
        if queue:
            self._queues[key] = queue
        else:
            self._queues.pop(key, None)
        return queue

    def _leave_queue(self, key: str, owner_id: str, holder: str) -> None:
        queue = self._queues.get(key)
        if queue is not None:
            queue[:] = [w for w in queue if (w.owner_id, w.holder) != (owner_id, holder)]
            if not queue:
                del self._queues[key]

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        now = self._now()
        if key not in self._leases and key not in self._queues:
            # Free, and nobody queued (every run's conversation, most of the time): granted
            # as the queue would grant it, without joining and leaving the queue.
            return LeaseGrant(True, self._grant(key, owner, ttl, holder, now))
        current = self._read_lease(key, now)
        ahead = 0
        if queue:
            waiters = self._waiters(key, now)
            place = next(
                (n for n, w in enumerate(waiters) if (w.owner_id, w.holder) == (owner.id, holder)),
                None,
            )
            if place is None:
                waiters.append(_Waiter(owner.id, holder, now, ttl))
                self._queues[key] = waiters
                place = len(waiters) - 1
            else:
                waiters[place].asked_at, waiters[place].ttl = now, ttl
            ahead = place
        if current is not None and (current.owner.id, current.holder) == (owner.id, holder):
            renewed = attrs.evolve(current, owner=owner, renewed_at=now, expires_at=now + ttl)
            self._leases[key] = attrs.evolve(renewed, expired=False)
            self._leave_queue(key, owner.id, holder)
            return LeaseGrant(True, attrs.evolve(renewed, expired=False))
        taken_over = current is not None and (current.expired or self._gone(current.owner))
        if current is not None and not taken_over:
            return LeaseGrant(False, current, None, ahead)
        if ahead:
            return LeaseGrant(False, None, None, ahead)  # free: the first live waiter's turn
        lease = self._grant(key, owner, ttl, holder, now)
        if queue:
            self._leave_queue(key, owner.id, holder)
        return LeaseGrant(True, lease, current)

    def _grant(self, key: str, owner: LeaseOwner, ttl: float, holder: str, now: float) -> Lease:
        """A new lease of ``key``: the next token, whoever held it before."""
        token = self._tokens.get(key, 0) + 1
        self._tokens[key] = token
        lease = Lease(key, owner, token, holder, now, now, now + ttl)
        self._leases[key] = lease
        return lease

    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        now = self._now()
        renewed: list[Lease] = []
        for lease in leases:
            current = self._leases.get(lease.key)
            if current is None or (current.token, current.owner.id) != (
                lease.token,
                lease.owner.id,
            ):
                continue  # lost: left out of the answer
            current = attrs.evolve(current, renewed_at=now, expires_at=now + ttl)
            self._leases[lease.key] = current
            renewed.append(current)
        return renewed

    async def release_lease(self, lease: Lease) -> None:
        current = self._leases.get(lease.key)
        if current is not None and (current.token, current.owner.id) == (
            lease.token,
            lease.owner.id,
        ):
            del self._leases[lease.key]
            self._leave_queue(lease.key, lease.owner.id, lease.holder)

    async def get_lease(self, key: str) -> Lease | None:
        return self._read_lease(key, self._now())

    async def request_cancel(
        self, reason: str, *, run_id: str | None = None, lease_key: str | None = None
    ) -> CancelRequest:
        now = self._now()
        self._cancels = [(at, r) for at, r in self._cancels if now - at < CANCEL_REQUESTS_KEPT]
        self._last_cancel_id += 1
        request = CancelRequest(self._last_cancel_id, reason, run_id, lease_key)
        self._cancels.append((now, request))
        self._wake()
        return request

    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        return [r for _, r in self._cancels if r.id > after]  # appended in id order

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        with trio.move_on_after(seconds):
            while not (self._cancels and self._cancels[-1][1].id > after):
                await self._appended.wait()

    # -- run events ----------------------------------------------------------------------------

    def _wake(self) -> None:
        self._appended.set()
        self._appended = trio.Event()

    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> list[str]:
        now = self._now()
        refused: list[str] = []
        for batch in batches:
            found = self._run_events.get(batch.run_id)
            owner, events, _, token = found or (batch.principal, [], now, None)
            fence = batch.fence
            started = self._runs.get(batch.run_id) if fence is not None else None
            if fence and started and started.lease_key not in (None, fence.key):
                # another request's (its start of the stored id refused): never written
                if batch.run_id not in refused:
                    refused.append(batch.run_id)
                continue
            # Another principal's events: never replaced, unless this is the stored run's own
            # batch and those were a refused request's, written before the run started.
            replacing = owner != batch.principal
            if replacing and not (started is not None and started.principal == batch.principal):
                continue
            if fence is not None and self._stale_events(
                batch.run_id, fence, None if replacing else token
            ):
                if batch.run_id not in refused:
                    refused.append(batch.run_id)
                continue  # an attempt a later one replaced: nothing of it is written
            token = fence.token if fence is not None else None
            if batch.restart or replacing:
                events = []
            events = [*events, *batch.events][-keep:]
            self._run_events.pop(batch.run_id, None)  # re-inserted last: oldest first below
            self._run_events[batch.run_id] = (batch.principal, events, now, token)
        for run_id, (_, _, at, _) in list(self._run_events.items()):
            if now - at < RUN_EVENTS_KEPT:
                break
            del self._run_events[run_id]
        self._wake()
        return refused

    def _stale_events(self, run_id: str, fence: Lease, written: int | None) -> bool:
        """Whether a later attempt of the run has begun under a later grant of the fence's
        key: its events were written, or it was started, under a greater token, or the run
        holds the key now under one (its next attempt took the lease over)."""
        if written is not None and written > fence.token:
            return True
        started = self._run_fences.get(run_id)
        if started is not None and started[0] == fence.key and started[1] > fence.token:
            return True
        lease = self._leases.get(fence.key)
        return lease is not None and lease.holder == run_id and lease.token > fence.token

    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        found = self._run_events.get(run_id)
        if found is None:
            return None
        principal, events = found[0], found[1]
        first = events[0].id if events else 1
        return RunEvents(run_id, principal, first, [e for e in events if e.id > after][:limit])

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            while True:
                found = self._run_events.get(run_id)
                if found is not None and found[1] and found[1][-1].id > after:
                    return True
                await self._appended.wait()
        return False

    # -- counters ------------------------------------------------------------------------------

    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        total = self._counters.get(key, 0.0) + amount
        if limit is not None and amount >= 0 and total > limit:
            return None
        self._counters[key] = total
        return total

    async def counter(self, key: str) -> float:
        return self._counters.get(key, 0.0)

    # -- conversations -------------------------------------------------------------------------

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        key = ConversationKey(agent_id, session_id, principal, user_id)
        return [_stored(r[4]) for r in self._by_conversation.get(key, ())]

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        self._check_fence(fence)
        previous = self._runs.get(run.run_id)
        attempt = 1
        if previous is not None:  # a retry: a new attempt, with a proof of its own
            differs = identity_differs(run, previous)
            if differs:  # another request's id: refused, nothing written
                raise RunIdTaken(run.run_id, previous.principal, differs)
            attempt = previous.attempt + 1
            superseded = self._proofs.pop(run.run_id, None)
            if superseded is not None:
                self.superseded_proofs.append(superseded)
            for n in range(1, attempt):  # an attempt that never ended was interrupted
                self._reply_metadata.setdefault(
                    (run.run_id, n), {"status": "interrupted", "attempt": n}
                )
        # Made directly, not by attrs.evolve (which reads the class's fields on every call).
        stored = RunRecord(
            run_id=run.run_id,
            agent_id=run.agent_id,
            session_id=run.session_id,
            user_id=run.user_id,
            principal=run.principal,
            status="running",
            verification=run.verification,
            incomplete_reason=run.incomplete_reason,
            metadata=run.metadata,
            started_at=run.started_at,
            finished_at=None,
            attempt=attempt,
            lease_key=fence.key if fence is not None else None,
            lease=None,
        )
        self._runs[run.run_id] = stored
        if fence is not None:
            self._run_fences[run.run_id] = (fence.key, fence.token)
        else:
            self._run_fences.pop(run.run_id, None)
        return stored

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
        self._check_fence(fence)
        # The state row encoded, and the run's proof made, first: a value that cannot be
        # stored writes nothing. No checkpoint from here on: the turn, the state row and the
        # end are written at one step.
        encoded = None if state is None else canonical_json(state.value)
        proof = None if ending is None else self._proof_with(run.run_id, tools, ending)
        writing = self._writing.get(run.run_id)
        if writing is not None and writing[0] is run:
            conversation = writing[1]
        else:
            key = ConversationKey(run.agent_id, run.session_id, run.principal, run.user_id)
            conversation = self._by_conversation.setdefault(key, [])
            self._writing[run.run_id] = (run, conversation)
        now = time.time()
        for m in messages:
            self._last_entry += 1
            conversation.append((self._last_entry, run.run_id, run.attempt, now, m))
        for record in tools:
            self._tools.setdefault(record.run_id, {})[record.call_id] = record
        if state is not None and encoded is not None:
            self._state[state.key] = encoded
        if ending is None or proof is None:
            return None
        self._finish(run.run_id, ending.metadata)
        self._proofs[run.run_id] = proof
        return proof

    def _proof_with(self, run_id: str, tools: Sequence[ToolRecord], ending: Ending) -> ProofRecord:
        """The run's proof (the stored one, if any) as ``finalize_proof`` would make it after
        a turn of ``tools``, written nowhere."""
        found = self._proofs.get(run_id)
        if found is not None:
            return found
        records = dict(self._tools.get(run_id, {}))
        for record in tools:
            if record.run_id == run_id:
                records[record.call_id] = record
        return make_proof(run_id, ending.metadata, list(records.values()), ending.assertions)

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        found = self._tools.get(run_id)
        return {} if found is None else dict(found)

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        self._check_fence(fence)
        self._finish(run_id, metadata)

    def _finish(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        self._writing.pop(run_id, None)
        # One copy of the caller's metadata, for the run and its history entries alike (both
        # are read, never changed, as a durable store's one row of them is).
        kept = dict(metadata)
        run = self._runs.get(run_id)
        attempt = 1
        if run is not None:
            attempt = run.attempt
            self._runs[run_id] = RunRecord(
                run_id=run.run_id,
                agent_id=run.agent_id,
                session_id=run.session_id,
                user_id=run.user_id,
                principal=run.principal,
                status=metadata.get("status", run.status),
                verification=metadata.get("verification"),
                incomplete_reason=metadata.get("incomplete_reason"),
                metadata=kept,
                started_at=run.started_at,
                finished_at=time.time(),
                attempt=run.attempt,
                lease_key=run.lease_key,
                lease=run.lease,
            )
        self._reply_metadata[(run_id, attempt)] = kept

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        entries = (
            _entry(key, recorded, self._reply_metadata.get((recorded[1], recorded[2])))
            for key, recorded_list in self._by_conversation.items()
            for recorded in recorded_list
            if key.session_id == session_id
            and (agent_id is None or key.agent_id == agent_id)
            and (principal is EVERY_PRINCIPAL or key.principal == principal)
        )
        return sorted(entries, key=lambda e: e.id)

    def _as_read(self, run: RunRecord, now: float) -> RunRecord:
        """A ``running`` run whose lease it no longer holds reads as ``interrupted``."""
        if run.status != "running":
            return run
        lease = self._read_lease(run.lease_key, now) if run.lease_key is not None else None
        return run_as_read(run, lease, self._gone)

    async def get_run(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        return self._as_read(run, self._now()) if run is not None else None

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
        ]
        now = self._now()
        newest = sorted(runs, key=lambda r: r.started_at, reverse=True)[:limit]
        return [self._as_read(r, now) for r in newest]

    # -- proofs --------------------------------------------------------------------------------

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self._check_fence(fence)
        if run_id not in self._proofs:
            found = self._tools.get(run_id)
            records = [] if found is None else list(found.values())  # in call order
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        return self._proofs.get(run_id)

    # -- checkpoints and state -----------------------------------------------------------------

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return list(self._checkpoints.get(run_id, {}).values())

    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        self._check_fence(fence)
        self._checkpoints.setdefault(checkpoint.run_id, {})[checkpoint.step_id] = checkpoint

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        steps = self._checkpoints.get(run_id, {})
        if step_id is None:
            return len(self._checkpoints.pop(run_id, {}))
        return 1 if steps.pop(step_id, None) is not None else 0

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        value = self._state.get(key)
        return json.loads(value) if value is not None else None

    async def save_state(
        self,
        key: str,
        value: Mapping[str, Any],
        fence: Lease | None = None,
        *,
        run_id: str | None = None,  # kept as long as the process: this store prunes nothing
    ) -> None:
        self._check_fence(fence)
        self._state[key] = canonical_json(value)  # stored as JSON, as a durable store would

    # -- approvals -----------------------------------------------------------------------------

    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        self._check_fence(fence)
        key = (request.run_id, request.call_id)
        if key not in self._approvals:
            self._approvals[key] = attrs.evolve(
                request, arguments=json.loads(canonical_json(request.arguments)), decision=None
            )
        return self._approvals[key]

    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        found = self._approvals.get((run_id, call_id))
        if found is None or not _sees(principal, found.principal):
            return None
        if found.decision is not None:
            raise AlreadyDecided(found)
        decided = attrs.evolve(found, decision=attrs.evolve(decision, decided_at=self._now()))
        self._approvals[(run_id, call_id)] = decided
        return decided

    async def get_approval(
        self,
        run_id: str,
        call_id: str,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        found = self._approvals.get((run_id, call_id))
        return found if found is not None and _sees(principal, found.principal) else None

    async def list_approvals(
        self,
        run_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
        *,
        pending: bool = False,
    ) -> list[ApprovalRequest]:
        return [
            r
            for r in self._approvals.values()
            if (run_id is None or r.run_id == run_id)
            and _sees(principal, r.principal)
            and not (pending and r.decision is not None)
        ]


def _sees(principal: str | EveryPrincipal | None, owner: str | None) -> bool:
    """Whether a read limited to ``principal`` sees what ``owner`` owns (None only None)."""
    return isinstance(principal, EveryPrincipal) or principal == owner
