"""The run object the engine hands to strategies and hooks (the kernel's ``Run`` protocol)."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from soulacy.kernel import PluginError, RunRequest, RunResult, Tool
from soulacy.kernel.contracts import ProgressDetector, ToolLoop
from soulacy.kernel.engine import AWAITING_APPROVAL, HeldLease, RunStop, ToolOutcome
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall
from soulacy.kernel.store import Lease, RunRecord, ToolRecord

from ._deadlines import INF, RunClock
from ._participants import NO_PARTICIPANTS, Participants
from ._pause import go_on
from ._redaction import Redactions
from ._states import Life, RunState
from ._states import RunState as S

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec
    from soulacy.kernel.policy import ExecutionPolicy

    from ._engine import Engine
    from ._workers import Workers


@attrs.define
class ModelSetup:
    provider: Any
    provider_name: str
    model: str | None
    specs: list[Any]
    compactor: Any
    llm: Any = None  # the agent's llm section, read once per run
    allowance: int | None = None  # the input allowance of the run's policy
    calibrate: Any = None  # the compactor's calibrate(view, input_tokens), when it has one
    # The last request: sent again when nothing in it changed (the same view list, which
    # grows in place, and the same tools), instead of a new one every turn.
    request: ModelRequest | None = None


class EngineRun:
    """The engine's run: what :class:`soulacy.kernel.engine.Run` promises strategies and hooks,
    and the engine's own bookkeeping of it (every other attribute here is private to the
    engine plugin)."""

    def __init__(
        self,
        engine: Engine,
        workers: Workers,
        request: RunRequest,
        run_id: str,
        session_id: str,
        policy: ExecutionPolicy,
        agent: AgentSpec,
    ) -> None:
        kernel = engine.kernel
        self._engine = engine
        self.workers = workers  # its lease keeper, cancel watcher and watchdog
        self.agent = agent
        self.tools: dict[str, Tool] = {}
        self.detector: ProgressDetector | None = None
        self.evidence: dict[str, Any] = {}  # what outcome assertions can refer to
        self.kernel = kernel
        self.request = request
        self.run_id = run_id
        self.session_id = session_id
        self.agent_id = request.agent_id
        self.policy = policy
        self.messages: list[Message] = []
        self.first_new = 0  # index of the run's own first message (after loaded history)
        self.outcomes: dict[str, ToolOutcome] = {}  # by tool-call id: replay never re-executes
        self.result = RunResult(run_id, session_id, request.agent_id, started_at=time.time())
        self.record = RunRecord(
            run_id,
            request.agent_id,
            session_id,
            request.user_id,
            request.principal,
            started_at=self.result.started_at,
        )
        self.recorded = 0  # messages[:recorded] are stored (or came from the store)
        self.pending_tools: list[ToolRecord] = []
        self.begun: set[str] = set()  # ids of the calls whose tool started (see _answer_cut)
        # the calls reserved and running (the effect ledger, _ledger.py), by id
        self.under_way: dict[str, dict[str, Any]] = {}
        # its calls' arguments as the history and the proof keep them, until their record is
        # stored (_redaction.py)
        self.redactions: Redactions = {}
        self.last_yield = time.perf_counter()
        self.model_setup: ModelSetup | None = None
        # Who takes part in its turns (soulacy_run_participants), once its history is loaded.
        self.participants: Participants = NO_PARTICIPANTS
        self.held: HeldLease | None = None  # the conversation's lease: the fence of its writes
        # Where it is in its life (docs/running.md#a-runs-life): one state, no flags.
        self.life = Life()
        self.retry = False  # its run id was stored before: this is a later attempt
        self.attempt_due = 1  # the attempt it is recorded as (a retry: the stored run's next)
        # The run timeout's scope, once the strategy runs: a wait for an approval that does
        # not count against the timeout (approvals.wait_counts_against_timeout) moves it.
        self.timeout_scope: trio.CancelScope | None = None
        # The deadlines of its step (an operation timeout, which a person's decision never
        # uses up), its model call and its tool call, enforced by the kernel's watchdog.
        self.clock = RunClock(workers.watchdog)
        self.awaiting: str | None = None  # the call id it waits to have approved, meanwhile

    @property
    def state(self) -> RunState:
        return self.life.state

    def let_go(self) -> None:
        """Drop what plugins made for this run, once it is over. A helper that refers back to
        its run (the compactor's ``goal`` reads ``run.first_new``; a participant's bound
        methods) and is kept by the run makes a reference cycle: the run's objects would wait
        for the garbage collector, aging into its oldest generation meanwhile, instead of
        being freed when the run returns (W3: about 60 objects a run, and more full
        collections)."""
        self.model_setup = None
        self.participants = NO_PARTICIPANTS

    def move(self, target: RunState) -> None:
        """Move along one of the engine's transitions (_states.TRANSITIONS)."""
        self.life.move(target, self.run_id)

    def fence(self) -> Lease | None:
        """The lease this run's writes are made under (its conversation's), once it holds it."""
        return None if self.held is None else self.held.lease

    @property
    def step_scope(self) -> None:
        raise AttributeError(_NO_STEP_SCOPE)

    @step_scope.setter
    def step_scope(self, scope: object) -> None:
        raise AttributeError(_NO_STEP_SCOPE)

    async def call_tool(self, name: str, arguments: Mapping[str, Any], call_id: str) -> ToolOutcome:
        """Call a tool as the loop does: validated, permission-checked, recorded, replayed when
        ``call_id`` was executed before in this run, and judged by the progress detector."""
        call = ToolCall(call_id, name, dict(arguments))
        clock = self.clock
        if clock.step != INF and clock.target is self.timeout_scope:  # a step, no block
            with self.timeouts():
                return await self._engine._call_tool(self, call)
        return await self._engine._call_tool(self, call)

    async def turn(self, limit: Literal["turns", "steps"] = "turns") -> None:
        """A turn boundary: store what is pending, let other runs in, count the turn against
        the policy (raises RunStop when a limit is reached). ``limit="steps"`` counts it as a
        reasoning step (``reasoning.max_steps``) instead of a turn."""
        self.clock.step = INF  # a turn boundary ends the step
        await self._engine._record(self)
        await self._engine._yield(self)
        try:
            self._engine._check_budget(self, limit)
        except RunStop as stop:  # on_limit: pause asks a person first (_pause.py)
            if not await go_on(self._engine, self, stop):
                raise
        self.result.turns += 1

    def start_step(self, seconds: float | None) -> None:
        """Time the step that starts now: if it is not over within ``seconds`` (None: no
        limit), ``RunStop("incomplete", "step_timeout")`` is raised from the innermost
        :meth:`timeouts` block (or from the model or tool call it interrupts, outside any),
        which ends the run unless the strategy catches it. The next turn boundary
        (:meth:`turn`), :meth:`end_step` or the end of a ``timeouts(ends_step=True)`` block
        ends the step; a wait for approval does not count."""
        self.clock.step = INF if seconds is None else self.clock.due(seconds)

    def end_step(self) -> None:
        """The step is over: its deadline no longer applies."""
        self.clock.step = INF

    def timeouts(self, *, ends_step: bool = False) -> Timeouts:
        """A block in which a step's or a model call's timeout stops the block: it is raised
        from the block as ``RunStop("incomplete", "step_timeout" | "llm_timeout")``. One
        cancel scope for the whole block, however many turns it takes (a tool loop's); with
        ``ends_step`` the step in progress ends with the block. Outside any block,
        :meth:`call_model` (and :meth:`call_tool` during a step) make one of their own."""
        return Timeouts(self, ends_step)

    async def call_model(self, *, tools: bool = True) -> ModelReply:
        """One model call on the run's messages (compacted, timed, accounted); the reply is
        appended to the messages and returned. ``tools=False`` offers no tools. Its timeout
        raises ``RunStop("incomplete", "llm_timeout")``."""
        if self.clock.target is self.timeout_scope:  # in no timeouts() block: one of its own
            with self.timeouts():
                reply: ModelReply = await self._engine._call_model(self, offer_tools=tools)
        else:
            reply = await self._engine._call_model(self, offer_tools=tools)
        self.messages.append(reply.message)
        return reply

    async def tool_loop(self, limit: Literal["turns", "steps"] = "turns") -> None:
        """The tool loop (``soulacy_tool_loop``, the builtin ``classic`` plugin's by default)
        from here on, until a final answer (``complete``) or a limit; with ``limit="steps"``
        each model call is a reasoning step."""
        loop: ToolLoop = required(
            self.kernel.hook.soulacy_tool_loop(kernel=self.kernel, run=self),
            "soulacy_tool_loop",
            "the tool loop",
            "classic",
        )
        await loop(self, limit)

    def complete(self, reply: str) -> None:
        """End the run as completed with ``reply`` (verification follows, by hook)."""
        self.result.reply = reply
        self._engine._finish(self, "completed")

    async def emit(self, type: str, data: Mapping[str, Any]) -> None:
        await self._engine._emit(self, type, data)

    async def save(self) -> None:
        """Store what the run did so far under its fence (what led to a wait outlives us)."""
        await self._engine._record(self)

    def add_receipt(self, record: ToolRecord) -> None:
        """Store ``record`` with the next save, as a receipt of the run's proof."""
        self.pending_tools.append(record)

    async def wait_for_decision(
        self,
        call_id: str,
        decision: Awaitable[T],
        *,
        counts_against_timeout: bool = True,
        suspend_after: float | None = None,
    ) -> T:
        """Await a person's decision on ``call_id`` as state ``awaiting approval``. Deadlines
        the wait does not use up move by its length: the step's always, the run's unless
        ``counts_against_timeout``. Still undecided after ``suspend_after`` seconds, the run
        is suspended: it ends ``interrupted (awaiting_approval)`` here, stored as far as it
        went, and its decision resumes it by a same-id retry, on any process."""
        paused = []
        if self.timeout_scope is not None and not counts_against_timeout:
            paused.append(self.timeout_scope)
        began, deadlines = trio.current_time(), [s.deadline for s in paused]
        step, self.clock.step = self.clock.step, INF
        for scope in paused:
            scope.deadline = math.inf
        self.awaiting = call_id  # left set when the wait is cancelled: the run is suspended
        self.move(S.AWAITING_APPROVAL)
        waiting = self._engine.waiting_runs  # a run may wait on two calls at once
        waiting[self.run_id] += 1
        try:
            with trio.move_on_after(INF if suspend_after is None else suspend_after) as timer:
                answer = await decision
        finally:
            waiting[self.run_id] -= 1
            if not waiting[self.run_id]:
                del waiting[self.run_id]
            waited = trio.current_time() - began
            for scope, deadline in zip(paused, deadlines, strict=True):
                scope.deadline = deadline + waited
            if self.clock.step == INF:  # unless the strategy started a step meanwhile
                self.clock.set_step(step + waited)
        if timer.cancelled_caught:
            # Nothing of the run stays here: its task, slot and lease go with its ending.
            self.move(S.SUSPENDED)
            raise RunStop(
                "interrupted",
                AWAITING_APPROVAL,
                error=f"suspended while call {call_id!r} waits for a decision; the decision"
                " resumes the run, on any process",
            )
        self.awaiting = None
        self.move(S.RUNNING)
        return answer


T = TypeVar("T")

_NO_STEP_SCOPE = (
    "Run.step_scope is gone (docs/decisions/0046): time a step with run.start_step(seconds)"
)


class Timeouts:
    """:meth:`Run.timeouts`: the clock's target while the block runs; a step's or a model
    call's timeout that cancels it comes out of it as a :class:`RunStop`."""

    __slots__ = ("_ends_step", "_outer", "_run", "_scope")

    def __init__(self, run: EngineRun, ends_step: bool) -> None:
        self._run, self._ends_step = run, ends_step
        self._scope = trio.CancelScope()
        self._outer: trio.CancelScope | None = None

    def __enter__(self) -> None:
        clock = self._run.clock
        self._scope.__enter__()
        self._outer, clock.target = clock.target, self._scope

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        clock, scope = self._run.clock, self._scope
        clock.target = self._outer
        if self._ends_step:
            clock.step = INF
        handled = scope.__exit__(exc_type, exc, tb)
        fired = clock.took(scope)  # taken even when nothing noticed: the block is over
        if scope.cancelled_caught:
            raise RunStop("incomplete", fired[0] if fired else "step_timeout") from None
        return handled


def required(answer: Any, hook: str, role: str, builtin: str) -> Any:
    """``answer``, or a PluginError naming the role nobody plays: never a silent default."""
    if answer is None:
        raise PluginError(
            f"no loaded plugin answered {hook} ({role}; is the builtin {builtin!r} plugin"
            " disabled? load a plugin that implements it)"
        )
    return answer
