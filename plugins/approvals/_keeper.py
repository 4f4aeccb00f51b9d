"""Human approval of tool calls: a run's durable wait for a decision, and the decision.

The plugin's approval keeper (``soulacy_approval_keeper``). A run whose tool call needs
approval (a participant's ``needs_approval``) stores an
:class:`ApprovalRequest` (the store's approval role), emits ``tool.approval`` and waits. The
wait is durable: the request outlives the process, and a decision can be made in any process
sharing the store. A decision made in this kernel wakes its waiter at once; one made in
another process is found by polling the store every ``leases.cancel_poll`` (the interval at
which cancellations from other processes are seen, too). When the process that waited is
gone (the run reads ``interrupted``), the caller of :meth:`Approvals.decide` is told to
resume the run: a same-id retry, whose exactly-once replay re-executes nothing already
recorded and finds the stored decision when it reaches the call. See docs/approvals.md and
docs/decisions/0034-durable-tool-approvals.md.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import trio

from soulacy.kernel import (
    PluginError,
    RunRequest,
    SoulacyError,
    StashKey,
    format_duration,
    redact_arguments,
    redact_text,
)
from soulacy.kernel.contracts import Decided, Happened
from soulacy.kernel.engine import RunStop
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStore,
    EveryPrincipal,
    Lease,
    StorageError,
    ToolRecord,
)

if TYPE_CHECKING:
    from soulacy.kernel import Kernel, RunResult
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ToolCall

log = logging.getLogger("soulacy.approvals")

FINISHED = frozenset({"completed", "incomplete", "failed", "cancelled"})


EXPIRED_APPROVER = "soulacy (expired)"  # who decided a request nobody decided in time
RECEIPT_TOOL = "soulacy.approval"  # the tool name of a decision's proof receipt
RECEIPT_FIELDS = ("status", "approver", "decided_by", "note", "reasons", "decided_at")
# The call ids of the effect ledger's questions (a call cut while it ran): reserved by the
# engine, which gives a model's call with such an id a fresh one. The request stores the mark
# (``request["cut"]``), and a result is taken only for a request that has it.
CUT = "cut:"
PREVIEW = 200  # characters of a given result in an event, as of a tool's output (redacted)
RESULT_LIMIT = 100_000  # characters of a result a person gives for a cut call that happened


def result_problem(result: str) -> str | None:
    """What is wrong with ``result`` as the result of a cut call that happened (None: nothing),
    one rule for every way to give it: text that is not blank (an empty result tells the
    model nothing), at most :data:`RESULT_LIMIT` characters."""
    if not result.strip():
        return (
            "expected the call's result: text, not blank (an empty result tells the model nothing)"
        )
    if len(result) > RESULT_LIMIT:
        return f"expected at most {RESULT_LIMIT} characters"
    return None


class ApprovalMismatch(SoulacyError):
    """A decision sent for other arguments than the call's (its ``arguments_sha256`` is not
    the request's): a person approved what they were shown, nothing else."""


class ApprovalResultRefused(SoulacyError):
    """A result given for a call that is not one cut while it ran (its stored request is not
    the effect ledger's question, :func:`is_cut`): a call that did not run yet has no result
    to give; approve or deny it."""


class ApprovalClosed(SoulacyError):
    """A decision of a call whose run has ended (cancelled or timed out while it waited):
    nothing waits for it any more."""


def approval_store(kernel: Kernel) -> ApprovalStore:
    """The kernel's store in its approval role, or a PluginError saying that it keeps none."""
    store = kernel.store()
    if not callable(getattr(store, "decide_approval", None)):
        raise PluginError(
            f"the store {type(store).__name__} keeps no approvals (it lacks the ApprovalStore"
            " methods of soulacy.kernel.store): a run cannot wait for one durably"
        )
    return cast("ApprovalStore", store)


def expiry(kernel: Kernel) -> tuple[float | None, str]:
    """``approvals.expire_after`` in seconds (None: never) and ``approvals.on_expiry``
    (``deny`` or ``cancel``), the ``approvals`` plugin's keys: never, deny when no plugin
    declares them."""
    try:
        after = kernel.config.get("approvals.expire_after")
        outcome = str(kernel.config.get("approvals.on_expiry"))
    except KeyError:
        return None, "deny"
    seconds = float(getattr(after, "seconds", after) or 0)
    return (seconds if seconds > 0 else None), outcome


def suspend_after(kernel: Kernel) -> float | None:
    """``approvals.suspend_after`` in seconds (None: never), the ``approvals`` plugin's key:
    never when no plugin declares it."""
    try:
        after = kernel.config.get("approvals.suspend_after")
    except KeyError:
        return None
    seconds = float(getattr(after, "seconds", after) or 0)
    return seconds if seconds > 0 else None


def wait_counts_against_timeout(kernel: Kernel) -> bool:
    """``approvals.wait_counts_against_timeout`` (the ``approvals`` plugin's key): True when
    no plugin declares it."""
    try:
        return bool(kernel.config.get("approvals.wait_counts_against_timeout"))
    except KeyError:
        return True


class Approvals:
    """A kernel's approvals (:func:`approvals_of`): the approval keeper its runs ask
    (:meth:`ask`), their waits, and decisions."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._waiting: dict[tuple[str, str], trio.Event] = {}

    async def ask(self, run: Run, call: ToolCall, reasons: Sequence[str]) -> str | Happened | None:
        """Obtain a person's decision on ``call``, durably: None when it may run,
        :class:`Happened` with the result a person gave when it happened (a cut call), else
        the refusal the model gets. The decision goes into the proof as a receipt of its own
        (call id ``approval:<call id>``, tool ``soulacy.approval``), just before the call's."""
        # What led to this call is stored before the run waits: a retry in another process
        # (this one may die while it waits) replays up to here.
        await run.save()
        request = run.request
        asked = ApprovalRequest(
            run.run_id,
            call.id,
            call.name,
            redact_arguments(call.arguments),  # what the person sees, and the digest binds
            run.agent_id,
            run.session_id,
            request.principal,
            request.user_id,
            {
                "text": request.text,
                "overrides": dict(request.overrides),
                "mode": request.mode,
                **({"continues": True} if request.continues else {}),  # resumed as it was
                # the effect ledger's question: only such a call may be told it happened
                **({"cut": True} if call.id.startswith(CUT) else {}),
            },
            tuple(reasons),
        )
        stored = await self.request(asked, run.fence())
        if is_cut(stored) != is_cut(asked):
            # Stored before the engine reserved ``cut:`` ids, for a model's call so named: a
            # decision on that call is not a decision on the cut call.
            return (
                f"the approval request stored for call id {call.id!r} is not this question"
                " (one is a call cut while it ran, the other is not); it did not run"
            )
        if stored.digest != asked.digest:
            # A retry's call under this id is not the call that was put to a person: their
            # decision is for what they were shown, never for this.
            return (
                f"the call of tool {call.name!r} has other arguments than the approval request"
                f" stored for call id {call.id!r} (arguments_sha256 {stored.digest}); it did"
                " not run. Call the tool again under a new id."
            )
        if stored.pending:  # a retry may find the decision made while no process waited
            stored = await run.wait_for_decision(
                call.id,
                self._announce_and_wait(run, stored),
                counts_against_timeout=wait_counts_against_timeout(self.kernel),
                suspend_after=suspend_after(self.kernel),
            )
        decision = stored.decision
        assert decision is not None
        await run.emit("tool.approval", approval_event(run, stored))
        described = stored.describe()
        receipt = {k: described[k] for k in RECEIPT_FIELDS}
        if decision.result is not None:
            receipt["result"] = decision.result
        run.add_receipt(
            ToolRecord(
                run.run_id,
                f"approval:{call.id}",
                RECEIPT_TOOL,
                {"call_id": call.id, "tool": call.name, "arguments": asked.arguments},
                json.dumps(receipt, ensure_ascii=False, sort_keys=True),
                described["status"] == "denied",
            )
        )
        if decision.approved:
            return None
        if decision.result is not None:
            return Happened(decision.result)
        if decision.approver == EXPIRED_APPROVER and expiry(self.kernel)[1] == "cancel":
            raise RunStop("cancelled", "approval_expired", error=decision.note)
        by = decision.approver
        if decision.decided_by and decision.decided_by != decision.approver:
            by += f" (principal {decision.decided_by})"
        note = f": {decision.note}" if decision.note else ""
        return f"the call of tool {call.name!r} was denied by {by}{note}; it did not run"

    async def _announce_and_wait(self, run: Run, stored: ApprovalRequest) -> ApprovalRequest:
        # Announced once the run waits (a server draining to stop sees it waiting).
        await run.emit("tool.approval", approval_event(run, stored))
        return await self.wait_decision(run.run_id, stored.call_id)

    def waiting(self) -> list[tuple[str, str]]:
        """(run id, call id) of the calls this kernel's runs are waiting on."""
        return list(self._waiting)

    async def request(self, request: ApprovalRequest, fence: Lease | None) -> ApprovalRequest:
        """Store ``request`` (a retry gets the stored one, perhaps decided already)."""
        return await approval_store(self.kernel).request_approval(request, fence)

    async def wait_decision(self, run_id: str, call_id: str) -> ApprovalRequest:
        """Wait until the call is decided, here or in another process; returns the request
        with its decision."""
        key = (run_id, call_id)
        store = approval_store(self.kernel)
        poll = self.kernel.leases.poll_seconds()
        shared = bool(getattr(store, "multi_process", False))
        expire_after, _ = expiry(self.kernel)
        try:
            while True:
                # Made before the read: a decision between the read and the wait still wakes it.
                woken = self._waiting[key] = trio.Event()
                found = await store.get_approval(run_id, call_id)
                if found is None:
                    raise StorageError(
                        f"the approval request of call {call_id!r} of run {run_id!r} is gone"
                        " from the store"
                    )
                if not found.pending:
                    return found
                left = math.inf
                if expire_after is not None:  # by the wall clock: the request may be old
                    left = found.requested_at + expire_after - time.time()
                    if left <= 0:
                        return await self._expire(found, expire_after)
                with trio.move_on_after(min(left, poll) if shared else left):
                    await woken.wait()
        finally:
            self._waiting.pop(key, None)

    async def _expire(self, found: ApprovalRequest, after: float) -> ApprovalRequest:
        """Deny a request nobody decided within ``approvals.expire_after``, as any decision
        is (atomically: a person's decision made meanwhile wins)."""
        decision = ApprovalDecision(
            False, EXPIRED_APPROVER, None, f"not decided within {format_duration(after)}"
        )
        store = approval_store(self.kernel)
        try:
            decided = await store.decide_approval(found.run_id, found.call_id, decision)
        except AlreadyDecided as exc:
            return exc.request
        return found if decided is None else decided

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approved: bool,
        approver: str,
        decided_by: str | None = None,
        note: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
        digest: str | None = None,
        result: str | None = None,
    ) -> Decided | None:
        """Decide the call (atomically: a second decision raises ``AlreadyDecided``); None
        when ``principal`` sees no such request (another principal's run reads as none).
        ``result``: a call cut while it ran (the effect ledger's question, :func:`is_cut`)
        happened, and this is its result; it is not run again (``approved`` must be False:
        ValueError otherwise; :class:`ApprovalResultRefused` for a call that did not run yet).
        :class:`ApprovalClosed` when the run ended while the call waited;
        :class:`ApprovalMismatch` when ``digest`` (the ``arguments_sha256`` the person was
        shown) is not the request's."""
        if result is not None and approved:
            raise ValueError(
                "a call that happened is not run again: give result with approved=False"
            )
        problem = None if result is None else result_problem(result)
        if problem is not None:
            raise ValueError(f"result: {problem}")
        kernel = self.kernel
        store = approval_store(kernel)
        found = await store.get_approval(run_id, call_id, principal)
        if found is None:
            return None
        if result is not None and not is_cut(found):
            raise ApprovalResultRefused(
                f"call {call_id!r} of run {run_id!r} did not run yet: only a call cut while it"
                " ran (the effect ledger's question) can be told it happened; approve or deny"
                " it"
            )
        if digest is not None and digest != found.digest:
            raise ApprovalMismatch(
                f"call {call_id!r} of run {run_id!r} waits for a decision on other arguments"
                f" (arguments_sha256 {found.digest}): decide what it shows now"
            )
        run = await kernel.store().get_run(run_id)
        if found.pending and run is not None and run.status in FINISHED:
            raise ApprovalClosed(
                f"run {run_id!r} ended ({run.status}"
                f"{', ' + run.incomplete_reason if run.incomplete_reason else ''}) while call"
                f" {call_id!r} waited for approval: nothing waits for a decision any more"
            )
        decision = ApprovalDecision(approved, approver, decided_by, note, result=result)
        decided = await store.decide_approval(run_id, call_id, decision, principal)
        if decided is None:
            return None
        woken = self._waiting.get((run_id, call_id))
        if woken is not None:
            woken.set()
            return Decided(decided, woke=True)
        if kernel.runner().holder(run_id) is not None:
            return Decided(decided)  # it runs here and reaches the call later
        run = await kernel.store().get_run(run_id)
        resume = run is not None and run.status == "interrupted"
        return Decided(decided, resume=resume)

    def retry_request(self, request: ApprovalRequest, *, stream: bool = False) -> RunRequest:
        """The same-id retry of the run that asked for ``request``."""
        original: dict[str, Any] = dict(request.request)
        mode = original.get("mode", "auto")
        return RunRequest(
            request.agent_id,
            str(original.get("text", "")),
            session_id=request.session_id,
            run_id=request.run_id,
            user_id=request.user_id,
            principal=request.principal,
            overrides=dict(original.get("overrides") or {}),
            stream=stream,
            mode="classic" if mode == "classic" else "auto",
            continues=bool(original.get("continues")),
        )

    async def resume(self, request: ApprovalRequest, *, stream: bool = False) -> RunResult:
        """Run the same-id retry of the run that asked for ``request`` in this kernel, to its
        end (the replay re-executes nothing already recorded)."""
        retry = self.retry_request(request, stream=stream)
        log.info("resuming run %s after the decision of call %s", request.run_id, request.call_id)
        return await self.kernel.run(
            retry.agent_id,
            retry.text,
            session_id=retry.session_id,
            run_id=retry.run_id,
            user_id=retry.user_id,
            principal=retry.principal,
            overrides=retry.overrides,
            stream=retry.stream,
            mode=retry.mode,
            continues=retry.continues,
        )


_approvals_key = StashKey[Approvals]("approvals")


def is_cut(request: ApprovalRequest) -> bool:
    """Whether ``request`` is the effect ledger's question on a call cut while it ran (marked
    when it was asked), the only kind that may be told it happened: never read from the call
    id, which a model chooses for its own calls."""
    return bool(request.request.get("cut"))


def approvals_of(kernel: Kernel) -> Approvals:
    """The kernel's :class:`Approvals` (one per kernel, in its stash)."""
    found = kernel.stash.get(_approvals_key, None)
    if found is None:
        found = kernel.stash[_approvals_key] = Approvals(kernel)
    return found


def approval_event(run: Run, request: ApprovalRequest) -> dict[str, Any]:
    """The data of a ``tool.approval`` event: the call, why it waits, and its status
    (``pending``, then ``approved``, ``denied`` or ``happened`` with who decided). A result
    given for a cut call that happened is shown as the engine shows a tool's output in events
    (every subscriber and stream gets them): its length and a redacted preview of its start;
    all of it is in the store, the proof's receipt and the decision's answer."""
    described = request.describe()
    given = described.pop("result")
    return {
        "turn": run.result.turns,
        "id": request.call_id,
        "name": request.tool,
        **{k: v for k, v in described.items() if k not in ("call_id", "tool")},
        **(
            {}
            if given is None
            else {"result_chars": len(given), "result_preview": redact_text(given[:PREVIEW])}
        ),
    }
