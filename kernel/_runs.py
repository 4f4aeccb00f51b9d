"""The contract of running: a request and how it ended, the run as strategies and hooks see
it, and the runner that the builtin ``engine`` plugin provides (``soulacy_runner``).

The kernel defines what a run is and asks a plugin to run it, as pytest's ``main`` and
``runner`` plugins run its sessions: the engine is an essential plugin, not kernel code
(docs/decisions/0060-the-engine-is-an-essential-plugin.md). Public through
:mod:`soulacy.kernel` (requests, results, handles) and :mod:`soulacy.kernel.engine`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, TypeVar, Unpack

import attrs
import trio

from ._json import json_encoder
from ._store import Lease, LeaseLost, ToolRecord

if TYPE_CHECKING:
    from ._contracts import ProgressDetector
    from ._kernel import AgentSpec, Kernel
    from ._messages import Message, ModelReply
    from ._tools import Tool
    from .policy import ExecutionPolicy

# "interrupted": cut by its process stopping (reason ``shutdown``); not finished in the store,
# so that a same-id retry resumes it (docs/decisions/0059-a-shutdown-interrupts-runs-resumably.md)
Status = Literal["completed", "incomplete", "failed", "cancelled", "interrupted"]
SHUTDOWN = "shutdown"  # the reason of a run interrupted because its kernel stops
# the reason of a run suspended while a call waits for a decision (which resumes it)
AWAITING_APPROVAL = "awaiting_approval"
VerificationStatus = Literal["verified", "unverified", "failed"]

T = TypeVar("T")

# Made once: every run makes its conversation's lease key (json.dumps(..., ensure_ascii=False)).
_lease_key_json = json_encoder(ensure_ascii=False)


def new_id() -> str:
    """A random id as ``uuid.uuid4().hex`` gives it (32 hex digits, version 4, RFC variant),
    without building a UUID object: every run that is not given its id makes one."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


@attrs.frozen
class ConversationKey:
    """Who a conversation belongs to: every store read and write of history goes by this."""

    agent_id: str
    session_id: str
    principal: str | None = None
    user_id: str | None = None

    def lease_key(self) -> str:
        """The key of the lease that serializes this conversation's turns across processes."""
        return "conversation:" + _lease_key_json(
            [self.agent_id, self.session_id, self.principal, self.user_id]
        )


@attrs.define(eq=False)
class RunHandle:
    run_id: str
    conversation: ConversationKey
    request: str = ""  # what identifies the request beyond its conversation (its input)
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    cancel_reason: str | None = None
    released: bool = False


@attrs.frozen
class RunRequest:
    """One request to an agent: a user's text in a conversation (``session_id``)."""

    agent_id: str
    text: str
    session_id: str | None = None
    run_id: str | None = None
    user_id: str | None = None
    principal: str | None = None
    overrides: Mapping[str, Any] = attrs.field(factory=dict)
    stream: bool = False
    # "classic": strategies other than the tool loop pass (a workflow's model-turn step uses
    # it), so the default strategy, the builtin ``classic`` plugin's tool loop, drives the run.
    mode: Literal["auto", "classic"] = "auto"
    # Continue the stored ``incomplete`` run of ``run_id`` in place (``Kernel.continue_run``):
    # its messages as they are, ``text`` (if any) as a steering message, the next attempt.
    continues: bool = False
    # The caller's W3C trace context (``traceparent``, ``tracestate``), which a tracing plugin
    # continues: the HTTP transport passes the request's headers on (it is in ``run.started``).
    trace: Mapping[str, str] = attrs.field(factory=dict)
    # A run id reserved beforehand (``Runner.reserve``), so that a transport can answer
    # 409/404/429 before it promises a stream; None: the run reserves its own.
    reservation: RunHandle | None = attrs.field(default=None, eq=False, repr=False)


@attrs.define
class RunResult:
    """How a run ended. ``status`` is never ``completed`` when a limit stopped the run."""

    run_id: str
    session_id: str
    agent_id: str
    reply: str = ""
    status: Status = "failed"
    verification: VerificationStatus = "unverified"
    incomplete_reason: str | None = None
    error: str | None = None
    turns: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    evidence: Mapping[str, Any] | None = None
    started_at: float = 0.0
    finished_at: float = 0.0
    proof: Mapping[str, Any] | None = None  # sha256 and receipt count of the stored proof
    cost_usd: float | None = None  # from price metadata (``costs.pricing``), when known
    assertions: list[Mapping[str, Any]] = attrs.Factory(list)  # evidence of each assertion
    attempt: int = 1  # the starts of this run id: a retry after a crash is the next attempt

    def metadata(self) -> dict[str, Any]:
        """The reply metadata: what transports, stores and terminal events carry."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "status": self.status,
            "verification": self.verification,
            "incomplete_reason": self.incomplete_reason,
            "error": self.error,
            "turns": self.turns,
            "llm_calls": self.llm_calls,
            "tool_calls": self.tool_calls,
            "tokens": {
                "input": self.input_tokens,
                "output": self.output_tokens,
                "total": self.input_tokens + self.output_tokens,
            },
            "evidence": dict(self.evidence) if self.evidence else None,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration_s": round(self.finished_at - self.started_at, 6),
            **({"proof": dict(self.proof)} if self.proof else {}),
            **({"assertions": list(self.assertions)} if self.assertions else {}),
            **({"attempt": self.attempt} if self.attempt > 1 else {}),
        }


@attrs.frozen
class ToolOutcome:
    content: str
    is_error: bool
    value: Any = None


class RunStop(Exception):
    """Raised inside a run (by the engine or a run strategy) to end it with a status."""

    def __init__(
        self,
        status: Status,
        reason: str | None = None,
        error: str | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(reason or error or status)
        self.status, self.reason, self.error, self.evidence = status, reason, error, evidence


@attrs.frozen
class Verification:
    """What ``soulacy_verify_outcome`` answers: the status and each assertion's evidence.

    With ``enforce="fail"`` a ``failed`` verification fails the run (reason ``outcome_failed``);
    with ``"report"`` the run keeps its status and says it was not verified.
    """

    status: VerificationStatus
    assertions: tuple[Mapping[str, Any], ...] = ()
    enforce: Literal["report", "fail"] = "report"


class Timeouts(Protocol):
    """What :meth:`Run.timeouts` returns: a ``with`` block."""

    def __enter__(self) -> None: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool: ...


class Run(Protocol):
    """One run as hooks and run strategies see it (the ``engine`` plugin's run implements it).

    A run strategy (``soulacy_run_strategy``) drives it through its mechanisms — :meth:`turn`,
    :meth:`call_model`, :meth:`call_tool`, :meth:`complete` — and ends it early by raising
    :class:`RunStop`. What the run does between them (the tool loop, its nudges, when a reply
    is an answer) is the strategy's policy (docs/decisions/0021-features-out-of-the-kernel.md).
    Everything else on the engine's object is the engine's own and may change.
    """

    kernel: Kernel
    request: RunRequest
    run_id: str
    session_id: str
    agent_id: str
    agent: AgentSpec
    policy: ExecutionPolicy
    messages: list[Message]  # the conversation as far as it went, loaded history first
    first_new: int  # index of the run's own first message (after loaded history)
    tools: dict[str, Tool]
    detector: ProgressDetector | None
    evidence: dict[str, Any]  # what outcome assertions can refer to
    result: RunResult  # filled in as the run goes (turns, tokens, cost) and when it ends
    held: HeldLease | None  # its conversation's lease, once it holds it (``lost`` if taken over)

    def fence(self) -> Lease | None:
        """The lease this run's writes are made under (its conversation's), once it holds it."""

    async def call_tool(self, name: str, arguments: Mapping[str, Any], call_id: str) -> ToolOutcome:
        """Call a tool as the loop does: validated, permission-checked, recorded, replayed when
        ``call_id`` was executed before in this run, and judged by the progress detector."""

    async def turn(self, limit: Literal["turns", "steps"] = "turns") -> None:
        """A turn boundary: store what is pending, let other runs in, count the turn against
        the policy (raises RunStop when a limit is reached). ``limit="steps"`` counts it as a
        reasoning step (``reasoning.max_steps``) instead of a turn."""

    def start_step(self, seconds: float | None) -> None:
        """Time the step that starts now (None: no limit): past it, ``RunStop("incomplete",
        "step_timeout")`` is raised from the innermost :meth:`timeouts` block (or from the
        model or tool call it interrupts). The next :meth:`turn`, :meth:`end_step` or the end
        of a ``timeouts(ends_step=True)`` block ends the step; a wait for approval does not
        count."""

    def end_step(self) -> None:
        """The step is over: its deadline no longer applies."""

    def timeouts(self, *, ends_step: bool = False) -> Timeouts:
        """A block in which a step's or a model call's timeout stops the block: it is raised
        from the block as ``RunStop("incomplete", "step_timeout" | "llm_timeout")``."""

    async def call_model(self, *, tools: bool = True) -> ModelReply:
        """One model call on the run's messages (compacted, timed, accounted); the reply is
        appended to the messages and returned. ``tools=False`` offers no tools."""

    async def tool_loop(self, limit: Literal["turns", "steps"] = "turns") -> None:
        """The tool loop (``soulacy_tool_loop``, the builtin ``classic`` plugin's by default)
        from here on, until a final answer (``complete``) or a limit."""

    def complete(self, reply: str) -> None:
        """End the run as completed with ``reply`` (verification follows, by hook)."""

    async def emit(self, type: str, data: Mapping[str, Any]) -> None:
        """Publish an event of this run (``kernel.events``); it must be awaited."""

    async def save(self) -> None:
        """Store what the run did so far (its messages and pending tool records) under its
        fence, now rather than at the next turn: what led here outlives this process."""

    def add_receipt(self, record: ToolRecord) -> None:
        """Store ``record`` with the run's next save, as a receipt of its proof (an approval
        plugin's decision, say: call id ``approval:<call id>``)."""

    async def wait_for_decision(
        self,
        call_id: str,
        decision: Awaitable[T],
        *,
        counts_against_timeout: bool = True,
        suspend_after: float | None = None,
    ) -> T:
        """Await ``decision``, a person's on call ``call_id``, as the run's ``awaiting
        approval`` state: the step's deadline does not run meanwhile, the run's timeout only
        when ``counts_against_timeout``. A run stopped while it waits, or still waiting after
        ``suspend_after`` seconds (raising ``RunStop("interrupted", AWAITING_APPROVAL)``), is
        suspended, or cancelled; a stored decision resumes it by a same-id retry."""


class HeldLease:
    """A lease held through the runner's :class:`LeaseKeeper`: ``lease`` is the current one
    (renewed in place, same token), the fence to pass to the writes made under it."""

    def __init__(self, lease: Lease, took_over_from: Lease | None) -> None:
        self.lease = lease
        self.took_over_from = took_over_from
        self.lost = False
        self.lost_to: Lease | None = None  # who holds it now, when a renewal found it lost

    def error(self) -> LeaseLost:
        return LeaseLost(self.lease.key, self.lease.token, self.lost_to)


class LeaseKeeper(Protocol):
    """``kernel.leases``: acquire leases in the store, renewed by heartbeat until released
    (docs/decisions/0029-leases-and-one-store.md)."""

    async def acquire(
        self,
        key: str,
        *,
        holder: str = "",
        queue: bool = False,
        wait: bool = True,
        on_lost: Callable[[], None] | None = None,
    ) -> HeldLease | None:
        """Acquire ``key`` and keep renewing it until :meth:`release`; with ``wait``, poll
        until granted (in the store's queue when ``queue``), else None when a live owner
        holds it. ``on_lost`` is called if a renewal finds the lease taken over."""

    async def release(self, held: HeldLease, *, shielded: bool = False) -> None:
        """Stop renewing and give the lease back (unless it was lost); never raises."""

    def poll_seconds(self) -> float:
        """How often to read what other processes sharing the store asked (cancellations,
        decisions): ``leases.cancel_poll``."""

    def hold(
        self, key: str, *, holder: str = "", queue: bool = False
    ) -> AbstractAsyncContextManager[HeldLease]:
        """Hold ``key`` for a block; a lease found lost cancels the block and raises
        :class:`LeaseLost` from it."""


class ContinueOptions(TypedDict, total=False):
    """The keywords of :meth:`Runner.continue_run`, each as :class:`RunRequest` has it:
    typed, so that a misspelt or mistyped one is a type error."""

    overrides: Mapping[str, Any] | None  # this attempt's limits (more turns, budget, time)
    stream: bool
    reservation: RunHandle | None  # from Runner.reserve


class Runner(Protocol):
    """What runs a kernel's runs (``soulacy_runner``; the essential ``engine`` plugin): runs
    them, and answers what is asked of a run by its id or its conversation (reservation,
    continuation, cancellation). ``Kernel.run``, ``continue_run``, ``cancel_run``,
    ``request_cancel`` and ``kernel.leases`` forward to it; transports reserve through
    ``kernel.runner()``."""

    @property
    def leases(self) -> LeaseKeeper:
        """The lease keeper (``kernel.leases``)."""

    async def run(self, request: RunRequest) -> RunResult:
        """Run one request and return how it ended (see :meth:`Kernel.run`)."""

    async def continue_run(
        self, run_id: str, text: str = "", **options: Unpack[ContinueOptions]
    ) -> RunResult:
        """Continue a run that ended ``incomplete`` (a limit, a stall, a timeout) in place,
        rather than starting over: the same run id as its next attempt, its conversation and
        tool records as they are (nothing re-executed), ``text`` as a steering message (when
        the conversation ends with the agent's reply and no text is given, ``Continue.``),
        and the limits of ``overrides`` (more turns, budget or time) for this attempt.
        ``options`` (:class:`ContinueOptions`, typed) are ``overrides``, ``stream`` and
        ``reservation``, as :class:`RunRequest` has them (see :meth:`Kernel.continue_run`).

        Raises :class:`RunNotContinuable` for a run that is not stored or not incomplete.
        Whose run it is, is the caller's to check (a transport compares principals first).
        """

    def reserve(self, request: RunRequest, *, exclusive: bool = False) -> RunHandle:
        """Reserve the request's ``run_id`` for it now, before anything of its run is stored
        or published (its ``run_id`` and ``session_id`` set).

        Raises :class:`RunIdInUse` when a live run of this kernel holds the id for another
        request (a retry of the same conversation, text and overrides queues behind it, unless
        ``exclusive``: a transport that must answer at once says so), and
        :class:`CapacityError` beyond ``runtime.max_concurrent_sessions`` or its per-principal
        cap. Run the request with the handle as its ``reservation``, or give it back with
        :meth:`release` if the run is not started after all.
        """

    def release(self, handle: RunHandle) -> None:
        """Give back a reservation that was not run (twice is harmless)."""

    def holder(self, run_id: str) -> RunHandle | None:
        """The reservation of a live run of this kernel with this id, if any."""

    def cancel_run(self, run_id: str, reason: str = "cancelled") -> int:
        """Cancel this kernel's runs with this id, running or queued; how many."""

    def cancel_conversation(self, conversation: ConversationKey, reason: str = "cancelled") -> int:
        """Cancel this kernel's active and queued runs of a conversation; how many."""

    async def request_cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        """Cancel the run with this id wherever it runs: here, or in another process sharing
        the store (it stops within ``leases.cancel_poll``). False when no live run has it."""

    async def request_cancel_conversation(
        self, conversation: ConversationKey, reason: str = "cancelled"
    ) -> int:
        """Cancel the active and queued runs of a conversation here and, through the store, in
        every other process; how many were cancelled here."""

    def tools_for(self, agent: AgentSpec) -> list[Tool]:
        """The tools a run of ``agent`` is offered, as its SOUL.yaml chooses them from what
        ``soulacy_tools`` contributes; a tool it names that nobody offers is a
        :class:`UsageError` (``config validate`` and studio ask before any run does)."""

    def statistics(self) -> dict[str, int]:
        """Counts of what runs now (``runs``: reserved runs, queued ones included)."""

    def awaiting_decisions(self) -> frozenset[str]:
        """Ids of this kernel's runs waiting for a person's decision
        (:meth:`Run.wait_for_decision`): a server draining to stop need not wait for them."""

    async def aclose(self) -> None:
        """One last attempt at what the store refused, then stop. Never raises."""
