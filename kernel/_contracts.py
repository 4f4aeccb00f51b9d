"""What the run engine expects of the objects that per-run hooks return.

Public through :mod:`soulacy.kernel.contracts`; the hook specifications are typed with these.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, Required, TypeAlias, TypedDict, Unpack

import attrs

from ._errors import SoulacyError
from ._messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from ._store import ApprovalRequest, EveryPrincipal

if TYPE_CHECKING:
    from ._runs import Run, RunResult, ToolOutcome

VerdictKind = Literal["progress", "repeated", "stalled"]


@attrs.frozen
class Verdict:
    """A progress detector's judgement of one tool result.

    ``stalled`` ends the run as incomplete (reason ``no_progress``) with ``evidence``;
    ``warning``, when set, is appended to the tool result so that the model reads it.
    """

    kind: VerdictKind
    warning: str | None = None
    evidence: Mapping[str, Any] = attrs.field(factory=dict)


class ProgressDetector(Protocol):
    """Judges every tool result of one run (``soulacy_progress_detector``).

    It may also define ``observe_reply(text) -> Verdict``, which the tool loop calls for each
    reply that is not an answer (empty, or only saying it is working on it): a ``stalled``
    verdict ends the run as ``no_progress`` with its evidence. A detector without it never
    stops a run for idle replies. (Optional, as ``Compactor.calibrate`` is, so that detectors
    written before it still load.)
    """

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict: ...


class Compactor(Protocol):
    """Builds the message list sent to the model under an input allowance in tokens
    (``soulacy_compactor``); ``None`` means the allowance is unknown.

    It must not mutate ``messages`` (the run's own record). When what must be kept (system
    instructions and ``tools`` schemas) cannot fit, it raises :class:`ContextOverflow`. It may
    also define ``calibrate(view, reported_input_tokens)``, which the engine calls after each
    model call with the provider's own count of what was sent.
    """

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]: ...


# What ``soulacy_run_strategy`` returns: drives one run to its end (``run.complete(reply)`` or
# ``raise RunStop``); the engine keeps serialization, timeouts, storage and the terminal event.
RunStrategy: TypeAlias = "Callable[[Run], Awaitable[None]]"
# What ``soulacy_tool_loop`` returns: the tool loop, counting each model call as a turn or, with
# ``"steps"``, as a reasoning step (``Run.tool_loop`` calls it).
ToolLoop: TypeAlias = "Callable[[Run, Literal['turns', 'steps']], Awaitable[None]]"


class ContextOverflow(SoulacyError):
    """What must be sent (system instructions and tool schemas) exceeds the input allowance.

    Dropping the task cannot resolve that conflict, so the run fails with the sizes measured
    and the provider's actual limit, when known.
    """

    def __init__(
        self, message: str, *, required: int, allowance: int, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.required = required
        self.allowance = allowance
        self.limit = limit


# What a participant's "may it happen" methods answer: None (yes) or why not, at once or
# awaited ("await me maybe", as the hooks that allow it).
Refusal: TypeAlias = "str | Awaitable[str | None] | None"


class RunParticipant:
    """Takes part in one run (``soulacy_run_participants``): the shape of the OpenAI Agents
    SDK's ``RunHooks``. Pluggy decides once per run *who* takes part; each turn then calls
    plain methods on those objects (docs/decisions/0061-per-run-participants.md).

    Every method is optional: subclass this and override what you need, or give any object
    the methods it needs; the engine calls only the methods an object defines other than
    these no-ops, in the order the hook returned the participants (then the run's compactor
    and progress detector, when they define any). A method that raises fails the run (as a
    hook that raises did), except ``run_ended``, whose errors are logged.
    """

    def before_model_call(self, run: Run, request: ModelRequest) -> Refusal:
        """Before each model call, with the request about to be sent: None admits it; a
        reason (such as ``max_cost_usd``) ends the run ``incomplete`` with that reason
        instead. Called for every participant even after one refused; the first reason is
        the run's."""
        return None

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        """After each model call, with its reply (``reply.usage``); ``run.result`` already
        counts its tokens. The ``costs`` participant adds the call's price to
        ``run.result.cost_usd`` here."""

    def before_tool_call(self, run: Run, call: ToolCall) -> Refusal:
        """Before each tool call that validated (never for a call replayed from its record):
        None lets it go on; a reason refuses it, and the model gets ``error: <reason>`` as
        the call's result. Every participant is asked and any refusal wins."""
        return None

    def needs_approval(self, run: Run, call: ToolCall) -> str | None:
        """Why a person must approve the call before it runs (such as ``"confirm_tools lists
        'delete'"``), or None. Asked once the call is allowed; any reason makes the run wait,
        durably, for the decision (docs/approvals.md)."""
        return None

    def after_tool_call(self, run: Run, call: ToolCall, outcome: ToolOutcome) -> None:
        """After each tool call that was not replayed from its record, with its outcome (an
        error result when it was refused, denied or failed)."""

    def run_ended(self, run: Run) -> Awaitable[None] | None:
        """Once, after the run's outcome was stored (``run.result`` says how it ended),
        before its terminal event. Errors are logged, never change the outcome."""
        return None


@attrs.frozen
class Happened:
    """An approval keeper's answer that a call cut while it ran (``cut:<call id>``) happened:
    it is not run again and ``result`` is its result, as a person gave it
    (docs/decisions/0081-a-cut-call-can-be-told-it-happened.md)."""

    result: str


class DecisionKeywords(TypedDict, total=False):
    """The keywords of :meth:`ApprovalKeeper.decide`: ``approved`` and ``approver`` are
    required; ``principal`` (default: every principal) is whose runs the caller sees;
    ``digest``: the ``arguments_sha256`` the person was shown; ``result``: a call cut while it
    ran happened, with this result (``approved`` False)."""

    approved: Required[bool]
    approver: Required[str]
    decided_by: str | None  # the principal that sent the decision
    note: str | None
    principal: str | EveryPrincipal | None
    digest: str | None
    result: str | None


@attrs.frozen
class Decided:
    """The outcome of :meth:`ApprovalKeeper.decide`: the request as decided, whether a run of
    this kernel was waiting for it (``woke``), and whether the run must be resumed here
    because the process that waited is gone (``resume``: pass ``request`` to
    :meth:`ApprovalKeeper.resume`)."""

    request: ApprovalRequest
    woke: bool = False
    resume: bool = False


class ApprovalKeeper(Protocol):
    """Obtains a person's decision on a tool call that needs one (``soulacy_approval_keeper``;
    the builtin ``approvals`` plugin keeps them durably in the store).

    Which calls need a decision is the participants' ``needs_approval``; how it is asked,
    waited for and recorded is the keeper's, through the run's :meth:`Run.save`,
    :meth:`Run.wait_for_decision` and :meth:`Run.add_receipt`
    (docs/decisions/0069-approvals-are-a-plugin.md)."""

    async def ask(self, run: Run, call: ToolCall, reasons: Sequence[str]) -> str | Happened | None:
        """Decide ``call`` (``reasons``: why it needs a person): None when it may run, else
        the refusal the model gets as its result (``error: <refusal>``), or :class:`Happened`:
        the call is not run and its result is the one given (not an error). It may raise
        :class:`RunStop` to end the run instead."""
        ...

    async def decide(
        self, run_id: str, call_id: str, **decision: Unpack[DecisionKeywords]
    ) -> Decided | None:
        """A person's decision on the call ``call_id`` of run ``run_id``
        (:class:`DecisionKeywords`), made once (a second one raises ``AlreadyDecided``); None
        when ``principal`` sees no such request. What a transport other than the keeper's own
        (AG-UI's interrupts, say) calls to decide; it raises a :class:`SoulacyError` when the
        decision cannot be taken (decided already, the run ended, other arguments)."""
        ...

    async def resume(self, request: ApprovalRequest, *, stream: bool = False) -> RunResult:
        """Run the same-id retry of the run that asked for ``request`` in this kernel, to its
        end: what a caller does when :meth:`decide` says ``resume`` (the process that waited
        is gone)."""
        ...
