"""What stores keep and the protocols they implement.

One object plays every role (``soulacy_store``): conversation history with reply metadata and
runs; tool records and proofs; workflow checkpoints and plugin state; leases with fencing
tokens and cancellation requests; shared counters. Failures are raised as
:class:`StorageError`, never read as "no data". The in-memory store is a builtin plugin
(``soulacy.plugins.memory_store``), the trylast default.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import inspect
import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, cast

import attrs

from ._errors import SoulacyError
from ._json import json_encoder
from ._messages import Message, Role, ToolCall


class StorageError(SoulacyError):
    """A store could not read or write (locked, read-only, full, corrupt …)."""


@attrs.frozen
class RunRecord:
    """A run's identity and how it ended.

    ``status`` is ``running`` while its lease lives; a store reads a ``running`` run whose lease
    expired, or whose owner is provably gone, as ``interrupted``, with the lease (owner, last
    heartbeat) in ``lease``. ``attempt`` counts the starts of this run id (a retry is a new
    attempt, 1 first); ``lease_key`` names the lease the run writes under.
    """

    run_id: str
    agent_id: str
    session_id: str
    user_id: str | None = None
    principal: str | None = None
    status: str = "running"
    verification: str | None = None
    incomplete_reason: str | None = None
    metadata: Mapping[str, Any] | None = None
    started_at: float = attrs.field(factory=time.time)
    finished_at: float | None = None
    attempt: int = 1
    lease_key: str | None = None
    lease: Mapping[str, Any] | None = None  # Lease.describe() of an interrupted run


# What a run id names: a retry of a run id must repeat these (RunIdTaken otherwise).
RUN_IDENTITY = ("agent_id", "session_id", "user_id", "principal")


def identity_differs(run: RunRecord, stored: RunRecord | Sequence[Any]) -> list[str]:
    """The fields of a run's identity (``agent_id``, ``session_id``, ``user_id``,
    ``principal``) in which ``run`` differs from ``stored``, a record or those four values in
    that order: empty when ``run`` is a retry of ``stored``."""
    if isinstance(stored, RunRecord):
        stored = [getattr(stored, name) for name in RUN_IDENTITY]
    return [
        name
        for name, value in zip(RUN_IDENTITY, stored, strict=True)
        if getattr(run, name) != value
    ]


class RunIdTaken(SoulacyError):
    """``start_run`` of a run id stored for another request: another agent, session, user or
    principal (``differs`` names which). Nothing was written. ``owner`` is the principal of
    the stored run: a transport answers 409 to it and 404 to any other principal, which must
    not learn that the id exists (the message names no value of the stored run)."""

    def __init__(self, run_id: str, owner: str | None, differs: Sequence[str]) -> None:
        self.run_id = run_id
        self.owner = owner
        self.differs = tuple(differs)
        super().__init__(
            f"run id {run_id!r} belongs to another request: {', '.join(self.differs)}"
            " differ(s); retry with the same request or use a new run id"
        )


@attrs.frozen
class HistoryEntry:
    """One stored message of a conversation, with the reply metadata of its run once known."""

    id: int
    agent_id: str
    session_id: str
    run_id: str | None
    role: str
    content: str
    tokens: int | None
    created_at: float
    metadata: Mapping[str, Any] | None = None
    tool_call_id: str | None = None
    tool_calls: Sequence[Mapping[str, Any]] = ()
    name: str | None = None
    is_error: bool = False
    principal: str | None = None  # whose conversation it is: part of the conversation key
    user_id: str | None = None
    attempt: int = 1  # the attempt of its run that wrote it; its metadata is that attempt's

    def message(self) -> Message:
        calls = tuple(ToolCall(c["id"], c["name"], c.get("arguments", {})) for c in self.tool_calls)
        role = cast("Role", self.role)
        return Message(role, self.content, calls, self.tool_call_id, self.name, self.is_error)


@attrs.frozen
class ToolRecord:
    """An executed tool call, by id: replay of the same id reuses it, even after a restart."""

    run_id: str
    call_id: str
    name: str
    arguments: Mapping[str, Any]
    content: str
    is_error: bool
    created_at: float = attrs.field(factory=time.time)


@attrs.frozen
class StateRow:
    """A run-bound state row written with a turn (``record_turn(..., state=)``): what
    ``save_state(key, value, fence, run_id=<the turn's run>)`` writes, in the turn's own
    transaction (the effect ledger's reservation with the reply that asked for the call)."""

    key: str
    value: Mapping[str, Any]


@attrs.frozen
class Ending:
    """How a run ended, written with its last turn (``record_turn(..., ending=)``): what
    ``finish_run(run_id, metadata, fence)`` and then ``finalize_proof(run_id, metadata,
    assertions, fence)`` write, in the turn's own transaction (the answer, the run's status and
    its proof at one commit)."""

    metadata: Mapping[str, Any]
    assertions: Sequence[Mapping[str, Any]] = ()


@attrs.frozen
class ProofRecord:
    """A run's final proof as canonical JSON, with its sha256."""

    run_id: str
    sha256: str
    body: str  # canonical JSON
    receipts: int
    created_at: float = attrs.field(factory=time.time)

    def data(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value


def label_interrupted(entry: HistoryEntry, run: RunRecord | None) -> HistoryEntry:
    """``entry`` as a history read shows it: written by the last attempt of a run that reads as
    ``interrupted`` and never given reply metadata, it reads ``{"status": "interrupted",
    "attempt": n}``, as a retry would label it (a crashed run is never shown as pending)."""
    if (
        entry.metadata is None
        and run is not None
        and run.status == "interrupted"
        and entry.attempt == run.attempt
    ):
        return attrs.evolve(entry, metadata={"status": "interrupted", "attempt": entry.attempt})
    return entry


# Made once (with its C encoder): proofs, receipts and reservations encode on every run.
_encode_canonical = json_encoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same data always hashes the same."""
    return _encode_canonical(value)


CheckpointStatus = Literal["pending", "in_progress", "completed", "failed"]


@attrs.frozen
class Checkpoint:
    """One workflow step of a run. ``identity`` None marks a checkpoint written without a
    verified request identity (by an earlier version): it needs reconciliation before reuse."""

    run_id: str
    step_id: str
    status: CheckpointStatus
    agent_id: str = ""
    evidence: Mapping[str, Any] | None = None
    identity: Mapping[str, Any] | None = None
    updated_at: float = attrs.field(factory=time.time)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # not Linux: the pid alone identifies the process
        return ""


def _process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot (Linux), "" when unknown: with the
    boot id it tells a live owner from a later process that reuses its pid. A zombie (exited,
    not yet reaped by its parent) reads as "exited"."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()
    return "exited" if fields[0] in ("Z", "X") else fields[19]


HOST_ID_VARIABLE = "SOULACY_HOST_ID"


def host_id() -> str:
    """The name of this host in leases: ``SOULACY_HOST_ID``, else the host name. Processes
    that share a host name but not a process table (containers on the host network) must set
    distinct ids, or one would take another's live pid for its own dead one."""
    return os.environ.get(HOST_ID_VARIABLE) or socket.gethostname()


@attrs.frozen
class LeaseOwner:
    """Who holds a lease: a kernel (``id``, random) in a process (``pid`` on ``host``) of one
    incarnation (``boot``: the host's boot id and the process's start time), so that neither
    a reboot nor a reused pid is taken for the owner still living."""

    id: str
    pid: int
    host: str
    boot: str = ""

    @classmethod
    def current(cls, owner_id: str) -> LeaseOwner:
        pid = os.getpid()
        return cls(owner_id, pid, host_id(), f"{_boot_id()}:{_process_start(pid)}")

    def provably_gone(self) -> bool:
        """True only when this owner's process is known to have exited: same host, and no
        process with its pid, or another boot, or another process under its pid."""
        if self.host != host_id():
            return False  # another machine's process cannot be proven gone from here
        boot, _, started = self.boot.partition(":")
        if boot and boot != _boot_id():
            return True  # the host rebooted since
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # a live process of another user
        now = _process_start(self.pid)
        return now == "exited" or (bool(started) and now not in ("", started))


@attrs.frozen
class Lease:
    """Ownership of ``key`` (a run's conversation turn, a workflow step, a schedule's run).

    ``token`` is the fencing token: it grows whenever the lease passes to another holder, and
    every write made under the lease (``fence=``) is refused with :class:`LeaseLost` once the
    token no longer holds. ``holder`` names what holds it within the owner (a run id).
    ``expired`` is the store's judgement when it read the lease, by its own clock.
    """

    key: str
    owner: LeaseOwner
    token: int
    holder: str = ""
    acquired_at: float = 0.0
    renewed_at: float = 0.0  # the last heartbeat
    expires_at: float = 0.0
    expired: bool = False

    def describe(self) -> dict[str, Any]:
        """The owner and the last heartbeat, as ``soulacy runs`` and the API show them."""
        return {
            "owner": attrs.asdict(self.owner),
            "holder": self.holder,
            "token": self.token,
            "heartbeat_at": self.renewed_at,
            "expires_at": self.expires_at,
        }


@attrs.frozen
class LeaseGrant:
    """The outcome of :meth:`LeaseStore.acquire_lease`.

    ``lease`` is ours when ``acquired``, else the live holder's (None when the lease is free
    but a waiter ahead of us is served first); ``took_over_from`` is the expired or dead lease
    replaced; ``ahead`` is how many waiters come before us in the queue.
    """

    acquired: bool
    lease: Lease | None
    took_over_from: Lease | None = None
    ahead: int = 0


class LeaseLost(StorageError):
    """A write under a lease that another holder has taken over: the writer must stop."""

    def __init__(self, key: str, token: int, current: Lease | None = None) -> None:
        state = "released"
        if current is not None:
            state = f"held by {current.holder or current.owner.id} (token {current.token})"
        super().__init__(f"the lease of {key!r} (token {token}) was lost: it is now {state}")
        self.key = key
        self.token = token
        self.current = current


@attrs.frozen
class CancelRequest:
    """A cancellation asked of whichever process runs ``run_id``, or every run of the
    conversation whose lease key is ``lease_key``."""

    id: int
    reason: str
    run_id: str | None = None
    lease_key: str | None = None


def run_as_read(
    run: RunRecord,
    lease: Lease | None,
    gone: Callable[[LeaseOwner], bool] = LeaseOwner.provably_gone,
) -> RunRecord:
    """``run`` as every store reads it: a ``running`` run whose lease does not prove it alive
    (none, released, a later run's, expired, or of an owner ``gone``) is ``interrupted``, with
    the lease described while it is still the run's own."""
    if run.status != "running":
        return run
    if lease is None or lease.holder != run.run_id:
        return attrs.evolve(run, status="interrupted")
    if lease.expired or gone(lease.owner):
        return attrs.evolve(run, status="interrupted", lease=lease.describe())
    return run


class CheckpointStore(Protocol):
    """Workflow checkpoints and plugins' small durable state."""

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        """The checkpoints of a run, in the order their steps were first saved."""

    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        """Insert or replace the checkpoint of (run, step), committed before returning; under
        ``fence``, only while that lease's token holds (else :class:`LeaseLost`)."""

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        """Delete a run's checkpoints (or one step's); returns how many."""

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        """A plugin's small durable state (a schedule's last tick, its failure streak)."""

    async def save_state(
        self,
        key: str,
        value: Mapping[str, Any],
        fence: Lease | None = None,
        *,
        run_id: str | None = None,
    ) -> None:
        """Replace the state of ``key`` with ``value`` (JSON), committed before returning;
        under ``fence`` only while its token holds. With ``run_id`` the state belongs to that
        run: a store that prunes runs (:class:`RetentionStore`) deletes it with the run."""


class LeaseStore(Protocol):
    """Leases with fencing tokens, and cancellation requests between processes.

    Time is the store's: expiry is judged by the clock of the store (one host's for SQLite,
    the server's for a database server), never by the caller's.
    """

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        """Take ``key`` for ``ttl`` seconds if it is free, already ours (same owner and holder:
        renewed, same token), expired, or held by an owner provably gone (``took_over_from``
        says whose). Every grant to another holder increases the token, released leases
        included, so a token is never reused. With ``queue``, callers are served in arrival
        order: each keeps its place while it asks again within ``ttl``, and a free lease goes
        to the first live waiter only."""

    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        """Extend, in one write, the leases whose token still holds; the lost ones are left
        out of the answer (their holder must stop)."""

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease back (and leave its queue) if its token still holds."""

    async def get_lease(self, key: str) -> Lease | None:
        """The lease of ``key`` with ``expired`` set by the store's clock; None when free."""

    async def request_cancel(
        self, reason: str, *, run_id: str | None = None, lease_key: str | None = None
    ) -> CancelRequest:
        """Ask the process running ``run_id`` (or every run holding or waiting for
        ``lease_key``) to cancel it; requests are kept an hour."""

    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        """Requests with an id greater than ``after``, oldest first (each process polls with
        the last id it saw)."""


class CounterStore(Protocol):
    """Counters shared by every process on the store: daily cost budgets, token quotas."""

    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        """Add ``amount`` to the counter ``key`` atomically, unless that would take it past
        ``limit`` (then nothing is added and None returned); the new total otherwise. A
        negative ``amount`` gives back (never refused). Keys carry their window
        (``cost:2026-12-01``); counters older than two days may be dropped."""

    async def counter(self, key: str) -> float:
        """The counter's total (0 for an unknown key)."""


@attrs.frozen
class RunEvent:
    """One event of a run's stream as its transport numbered it: ``id`` counts from 1 in each
    attempt's log; ``data`` is JSON.

    ``json``: ``data``'s JSON text, when whoever made the event has already encoded it (a
    transport encodes each event for its wire once, decision 0050), or a store read it as
    stored. A store may write this text instead of encoding ``data`` again; one that ignores
    it (a store written before it existed) stays correct. It decodes to ``data``; None: not
    encoded yet. Not compared: two events with equal data are equal however they were made.
    """

    id: int
    name: str
    data: Mapping[str, Any]
    json: str | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class RunEventBatch:
    """Events of one run to append, in order. ``restart``: a new attempt of the run began its
    log (its ids numbered after the earlier attempts', docs/http.md), so the events of earlier
    attempts are dropped first. ``fence``: the lease held by the attempt that made the events
    (``Run.fence()``, its conversation's; None: not fenced); the store refuses the batch once a
    later attempt of the run began under a later grant of that lease's key
    (``append_run_events``), so an owner paused past its lease never writes into the log of the
    attempt that replaced it."""

    run_id: str
    principal: str | None
    events: Sequence[RunEvent]
    restart: bool = False
    fence: Lease | None = None


@attrs.frozen
class RunEvents:
    """The stored events of a run after some id: ``first_kept`` is the lowest id still stored
    (a long run's earliest events are dropped), so a reader knows how many it missed."""

    run_id: str
    principal: str | None
    first_kept: int
    events: list[RunEvent]


class RunEventStore(Protocol):
    """Each run's stream events, shared by every process on the store: a client that reconnects
    to another process than the one running its run still gets every event it missed.

    Bounded like a transport's own log (the last ``keep`` events of a run), kept about a day.
    """

    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> list[str]:
        """Append every batch in one transaction (committed before returning), keep at most
        ``keep`` events of each run (the oldest are dropped; the newest, a ``result``, never
        is), and wake the :meth:`wait_run_events` callers of those runs in every process.

        A batch with a ``fence`` of an attempt that is no longer its run's current one is
        refused, checked in the same transaction: the run was started (``start_run``), or
        its stored events were written, under a greater token of the fence's key, or the run
        holds that key now under a greater token (its next attempt took the lease over). So is
        a fenced batch of another request than the stored run's (its fence's key is not the
        run's ``lease_key``: its own start of that run id was refused, :class:`RunIdTaken`).
        A batch of another principal than the run's stored events is ignored, unless it is
        the stored run's own (fenced under its ``lease_key``, of its principal): the events it
        then replaces were a refused request's, shared before the run was started.
        Nothing of a refused batch is written; the others are. Returns the ids of the runs
        whose batches were refused (empty: all written). The current attempt's batches are
        written even once its lease is released or granted to another run (a run's
        ``result`` comes after it released its conversation's lease)."""

    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        """The run's stored events with an id greater than ``after``, at most ``limit`` of
        them in id order; None when nothing is stored for the run."""

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        """Wait until the run has an event with an id greater than ``after`` (True) or
        ``seconds`` pass (False). A store that cannot be notified polls."""

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        """Return once a cancellation request with an id greater than ``after`` may exist, or
        after ``seconds`` (a store that cannot be notified just sleeps)."""


class EveryPrincipal(enum.Enum):
    """The ``principal`` of a history read that is not limited to one principal (an operator's
    ``soulacy history``); a transport always passes the caller's principal instead."""

    EVERY = "every principal"


EVERY_PRINCIPAL = EveryPrincipal.EVERY


# -- human approval of tool calls (docs/approvals.md, decision 0034) ------------------------


@attrs.frozen
class ApprovalDecision:
    """What a person decided about one tool call: ``approver`` as they named themselves,
    ``decided_by`` the principal that sent the decision (None: the operator's command line),
    ``note`` why (optional). ``decided_at`` is set by the store, by its clock. ``result``: the
    call happened (one cut by a crash, never run again); its result, as the person gave it."""

    approved: bool
    approver: str
    decided_by: str | None = None
    note: str | None = None
    decided_at: float = 0.0
    result: str | None = None


@attrs.frozen
class ApprovalRequest:
    """A tool call a run waits to have approved, keyed by (run id, call id).

    It carries the run's request (``agent_id`` … ``request``: its text, overrides and mode),
    so that whichever process receives the decision can retry the run under the same id when
    the process that waited is gone. ``decision`` is None while it is pending.
    """

    run_id: str
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    agent_id: str
    session_id: str
    principal: str | None = None
    user_id: str | None = None
    request: Mapping[str, Any] = attrs.field(factory=dict)
    reasons: Sequence[str] = ()
    requested_at: float = attrs.field(factory=time.time)
    decision: ApprovalDecision | None = None

    @property
    def pending(self) -> bool:
        return self.decision is None

    @property
    def digest(self) -> str:
        """The sha256 of the call as shown to the person deciding (its tool and arguments, as
        canonical JSON): a decision sent with a digest applies to that call only."""
        shown = canonical_json({"tool": self.tool, "arguments": dict(self.arguments)})
        return hashlib.sha256(shown.encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, Any]:
        """Plain data, as the API, the command line and the events show it."""
        decision = self.decision
        return {
            "run_id": self.run_id,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "arguments_sha256": self.digest,
            "reasons": list(self.reasons),
            "requested_at": self.requested_at,
            "status": "pending" if decision is None else _decided(decision),
            "approver": None if decision is None else decision.approver,
            "decided_by": None if decision is None else decision.decided_by,
            "note": None if decision is None else decision.note,
            "decided_at": None if decision is None else decision.decided_at,
            "result": None if decision is None else decision.result,
            # the effect ledger's question on a call cut while it ran: it may be told it
            # happened (marked when asked, never read from the call id a model chose)
            "cut": bool(self.request.get("cut")),
        }


def _decided(decision: ApprovalDecision) -> str:
    if decision.result is not None:
        return "happened"
    return "approved" if decision.approved else "denied"


class AlreadyDecided(SoulacyError):
    """A second decision of a tool call: the first one stands (``request`` shows it)."""

    def __init__(self, request: ApprovalRequest) -> None:
        decision = request.decision
        assert decision is not None
        status = _decided(decision)
        super().__init__(
            f"call {request.call_id!r} of run {request.run_id!r} was already"
            f" {'told it happened' if status == 'happened' else status} by {decision.approver}"
        )
        self.request = request


class ApprovalStore(Protocol):
    """Pending approvals of tool calls and their decisions, shared by every process on the
    store: a run waits for one durably, and any process may decide it.

    Reads and decisions know their principal: ``principal`` limits them to the requests of
    runs of that principal (``None`` matches only ``None``), or ``EVERY_PRINCIPAL`` (an
    operator's command line).
    """

    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        """Store ``request`` (committed before returning) unless one of the same (run id,
        call id) is stored; return the stored one, so that a retry finds the decision already
        made. Under ``fence`` only while its token holds (else :class:`LeaseLost`)."""

    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        """Record ``decision`` atomically if the call is pending, with ``decided_at`` by the
        store's clock, and return the request as decided. A call decided already raises
        :class:`AlreadyDecided` and nothing changes (of two concurrent decisions exactly one
        wins). None when there is no such request visible to ``principal``."""

    async def get_approval(
        self,
        run_id: str,
        call_id: str,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        """The request of (run, call) with its decision, or None (none, or not visible)."""

    async def list_approvals(
        self,
        run_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
        *,
        pending: bool = False,
    ) -> list[ApprovalRequest]:
        """Requests (of one run, or of every run) in the order they were made; ``pending``:
        only those not decided yet."""


class ConversationStore(Protocol):
    """History with reply metadata, runs and tool records.

    A conversation is keyed by (agent, session, principal, user): the same session id used by
    another principal or user is another conversation, and no read of one returns the other's
    messages (``None`` is a value of its own, matched only by ``None``).
    """

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        """The messages of one conversation, oldest first, to continue it."""

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        """Record a run as started (status ``running``, writing under ``fence``, whose key is
        kept as the run's ``lease_key``) and return the record as stored, with its attempt
        number. A run id names one request, insert-or-fail: when the id is stored with another
        identity (another agent, session, user or principal), :class:`RunIdTaken` is
        raised and nothing is written, the stored run untouched. The check and the write are
        one atomic step, so that of two processes starting a fresh id at once exactly one owns
        it. A retry of a run id (the same identity) is the next attempt: the previous
        attempt's proof is kept aside, and its history entries that never got reply metadata
        (it crashed) get ``{"status": "interrupted", "attempt": n}``, so that each attempt
        keeps its own."""

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
        """Durably add one turn's messages and executed tool calls, in one step, as entries of
        ``run.attempt``; under ``fence`` only while its token holds (else :class:`LeaseLost`,
        and nothing of the turn is written). With ``state``, that run-bound state row is
        written in the same step (as ``save_state(state.key, state.value, fence,
        run_id=run.run_id)``): the turn and the row are both stored, or neither, and a value
        that cannot be stored writes nothing of the turn. The parameter is optional for a
        store: :func:`record_turn_and_state` writes the two apart for a store without it.

        With ``ending`` (the turn may then be empty), the run's end is written in the same
        step, after the turn, and its proof returned: ``finish_run(run.run_id,
        ending.metadata, fence)`` and ``finalize_proof(run.run_id, ending.metadata,
        ending.assertions, fence)``, the proof made from the run's tool records with this
        turn's. The turn, the status and the proof are all stored, or none (a reader never
        sees the answer without the run's status, nor a finished run without its proof). Also
        optional: :func:`record_turn_and_end` makes the three writes for a store without it.
        Without ``ending`` the answer is None."""

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        """The executed tool calls of a run by call id (replay survives a restart)."""

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        """Record how a run ended, and set the reply metadata of the history entries of its
        current attempt (no other run's, no earlier attempt's); fenced as ``record_turn``."""

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        """Stored entries of a session with their metadata, oldest first: of one principal
        (its conversations with every agent, or with ``agent_id``), or of every principal."""

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run's record (``interrupted`` when it is ``running`` but its lease is not held
        by it, expired, or its owner is provably gone), or None for an unknown run id."""

    async def list_runs(
        self,
        limit: int = 50,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[RunRecord]:
        """Runs newest first (by ``started_at``), at most ``limit``, of ``agent_id`` or of every
        agent, of ``principal`` (None: runs without one) or of every principal, read as
        ``get_run`` reads them."""


# By store class and parameter: whether record_turn declares it.
_TURN_TAKES: dict[tuple[type, str], bool] = {}


def _turn_takes(store: ConversationStore, name: str) -> bool:
    """Whether ``store.record_turn`` declares the keyword ``name``; asked once per store
    class. A callable inspect cannot read declares nothing (the writes are made apart)."""
    kind = (type(store), name)
    found = _TURN_TAKES.get(kind)
    if found is None:
        parameters: Mapping[str, inspect.Parameter] = {}
        with contextlib.suppress(TypeError, ValueError):
            parameters = inspect.signature(store.record_turn).parameters
        parameter = parameters.get(name)
        found = _TURN_TAKES[kind] = parameter is not None and parameter.kind in (
            inspect.Parameter.KEYWORD_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
    return found


def takes_state(store: ConversationStore) -> bool:
    """Whether ``store.record_turn`` writes a state row with its turn (declares ``state``);
    asked once per store class. A store written before it had the parameter has not."""
    return _turn_takes(store, "state")


def takes_ending(store: ConversationStore) -> bool:
    """Whether ``store.record_turn`` writes a run's end with its last turn (declares
    ``ending``); asked once per store class. A store written before it had the parameter has
    not."""
    return _turn_takes(store, "ending")


async def record_turn_and_state(
    store: Store,
    run: RunRecord,
    messages: Sequence[Message],
    tools: Sequence[ToolRecord],
    fence: Lease | None,
    state: StateRow,
) -> None:
    """A turn and a run-bound state row, under ``fence``: in one step (one commit) when the
    store's ``record_turn`` takes ``state``, else the turn and then ``save_state``, as two
    (a store written before the parameter; :func:`takes_state`)."""
    if takes_state(store):
        await store.record_turn(run, messages, tools, fence, state=state)
        return
    if messages or tools:
        await store.record_turn(run, messages, tools, fence)
    await store.save_state(state.key, state.value, fence, run_id=run.run_id)


async def record_turn_and_end(
    store: Store,
    run: RunRecord,
    messages: Sequence[Message],
    tools: Sequence[ToolRecord],
    fence: Lease | None,
    ending: Ending,
) -> ProofRecord:
    """A run's last turn, its end and its proof, under ``fence``: in one step (one commit) when
    the store's ``record_turn`` takes ``ending``, else the turn, ``finish_run`` and
    ``finalize_proof``, as three (a store written before the parameter; :func:`takes_ending`).
    """
    if takes_ending(store):
        proof = await store.record_turn(run, messages, tools, fence, ending=ending)
        if proof is None:
            raise TypeError(
                f"{type(store).__qualname__}.record_turn(ending=) returned None: it returns"
                " the run's proof"
            )
        return proof
    if messages or tools:
        await store.record_turn(run, messages, tools, fence)
    await store.finish_run(run.run_id, ending.metadata, fence)
    return await store.finalize_proof(run.run_id, ending.metadata, ending.assertions, fence)


class ProofStore(Protocol):
    """Proofs of finished runs."""

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        """Build (``soulacy.plugins.proofkit.make_proof``) and store the run's proof from its
        tool records, once; a second call returns the stored proof. Concurrent finalizations
        wait for each other rather than fail."""

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        """The current attempt's proof, or None (unknown run, not finalized, or a retry
        started)."""


@attrs.frozen
class RetentionLimits:
    """How long a store keeps what runs leave, in seconds by its own clock; None keeps it for
    ever. Only what finished runs (and runs of no record) left is ever deleted, and each row
    with its own run's principal: a run that is not finished keeps everything.

    ``history``: conversation entries older than this. ``run_events``: the stream events of
    finished runs. ``proofs``: proofs (and the proofs of earlier attempts). ``runs``: finished
    runs with everything they left (history, tool records, proofs, events, checkpoints,
    decided approvals, their plugin state). ``leases``: lease rows released, or expired for
    longer than this, the token high-water mark kept. ``batch``: rows
    of one table deleted per transaction, so that a prune never holds a writer long.
    """

    history: float | None = None
    run_events: float | None = None
    proofs: float | None = None
    runs: float | None = None
    leases: float | None = 86400.0
    batch: int = 500


@attrs.frozen
class Pruned:
    """What one :meth:`RetentionStore.prune` deleted, by kind (rows)."""

    history: int = 0
    run_events: int = 0
    proofs: int = 0
    runs: int = 0
    state: int = 0
    leases: int = 0

    def total(self) -> int:
        return sum(attrs.astuple(self))


class RetentionStore(Protocol):
    """A store that deletes what runs left once it is older than a workspace's limits
    (docs/storage.md, Retention); the ``retention`` plugin calls it on a schedule."""

    async def prune(self, limits: RetentionLimits) -> Pruned:
        """Delete, committed before returning, what ``limits`` no longer keeps: never a row
        of a run that is not finished (status ``running``, whatever its lease says, or
        waiting for an approval), never another principal's rows under a run's id. Lease
        rows go with their token kept as a high-water mark: a pruned key granted again gets
        a token above every token ever granted for it. Safe to run from several processes
        at once and beside runs; each kind is deleted in transactions of ``limits.batch``
        rows at most (until none is left)."""


class Store(
    ConversationStore,
    ProofStore,
    CheckpointStore,
    LeaseStore,
    CounterStore,
    RunEventStore,
    ApprovalStore,
    Protocol,
):
    """Everything a run stores, in one place (``soulacy_store``): the writes made under a
    lease check its token in the same transaction, so one store plays every role
    (docs/decisions/0029-leases-and-one-store.md).

    ``multi_process`` says whether several processes may share the store (SQLite: one file;
    PostgreSQL: one server); the conformance kit's multi-process checks run only then.
    """

    multi_process: ClassVar[bool]
