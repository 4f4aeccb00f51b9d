"""The run engine: the run object and the mechanisms every run strategy drives.

The engine decides nothing on its own: limits come from the policy hook, the view sent to the
model from the compactor hook, stall verdicts from the progress hook, permissions from the
permission hook, and how the run proceeds from the run strategy hook (the builtin ``classic``
plugin's tool loop by default). It only enforces what they answer, and always ends with a
terminal event that says honestly how the run ended. A role no plugin answers is a
:class:`PluginError` naming the hook, never a silent default.
"""

from __future__ import annotations

import inspect
import math
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack

import attrs
import trio

from soulacy.kernel import (
    RunHandle,
    RunNotContinuable,
    RunRequest,
    RunResult,
    Tool,
    ToolCallContext,
    UsageError,
    json_encoder,
    redact_arguments,
    redact_text,
)
from soulacy.kernel.contracts import (
    ApprovalKeeper,
    Compactor,
    ContextOverflow,
    Happened,
    RunStrategy,
    Verdict,
)
from soulacy.kernel.engine import (
    AWAITING_APPROVAL,
    SHUTDOWN,
    ContinueOptions,
    RunStop,
    Status,
    ToolOutcome,
    Verification,
    in_tool_call,
    new_id,
)
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall
from soulacy.kernel.providers import ContextLengthExceeded, ProviderError
from soulacy.kernel.store import (
    ConversationKey,
    ConversationStore,
    Ending,
    LeaseLost,
    ProofRecord,
    RunIdTaken,
    StateRow,
    StorageError,
    Store,
    ToolRecord,
    identity_differs,
    record_turn_and_end,
    record_turn_and_state,
)

from ._conversations import Capacity, ConversationRegistry, read_capacity
from ._deadlines import INF
from ._endings import answer_cut, answer_loaded
from ._leases import Leases
from ._ledger import cut_calls, effects_of, reserve, settle
from ._outcomes import capped
from ._participants import Participants
from ._redaction import redacted_calls, redacted_record
from ._requests import (
    continue_run,
    request_cancel,
    request_cancel_conversation,
    request_fingerprint,
)
from ._run import EngineRun, ModelSetup, required
from ._states import RunState as S
from ._tools import tools_for
from ._workers import CURRENT, Workers, starter

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, Kernel, Settings
    from soulacy.kernel.policy import ExecutionPolicy, Limit

PREVIEW_CHARS = 200  # of a tool result, in its event
# The call ids of the engine's and the approval keeper's own questions and receipts: a cut
# call's question (``cut:``), a decision's receipt (``approval:``), a paused limit
# (``limit:``). A model's call never has one (:func:`_own_ids`): a decision made for a call
# the model named ``cut:X`` must never be taken for the effect ledger's question on ``X``.
RESERVED_IDS = ("cut:", "approval:", "limit:")
_PROGRESS = Verdict("progress")  # what a run without a progress detector judges every result
YIELD_INTERVAL = 0.001  # seconds a run may keep the Trio thread without a checkpoint


class _IdentityRefused(Exception):
    """The run id names another request (``identity_mismatch``), or a run that cannot
    continue (``not_continuable``): refused before its first turn, nothing of it stored."""

    def __init__(self, message: str, differs: list[str], reason: str = "identity_mismatch"):
        super().__init__(message)
        self.differs = differs
        self.reason = reason


def _seconds(limit: Limit[float]) -> float:
    return math.inf if limit.value is None else float(limit.value)


class _NoDeadline:
    """What ``trio.move_on_after`` gives for an unlimited timeout, without a cancel scope:
    entering and leaving one on every model and tool call is a measurable part of a turn."""

    cancelled_caught = False

    def __enter__(self) -> _NoDeadline:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


_NO_DEADLINE = _NoDeadline()


def _move_on_after(limit: Limit[float]) -> trio.CancelScope | _NoDeadline:
    """A cancel scope for ``limit`` seconds, or none at all when the limit is unlimited.
    (Made directly: ``trio.move_on_after`` costs a third more, on every model and tool call.)"""
    if limit.value is None:
        return _NO_DEADLINE
    return trio.CancelScope(deadline=trio.current_time() + float(limit.value))


_ENCODER = json_encoder(ensure_ascii=False, sort_keys=True, default=str)  # made once


# What a tool returns most often: never awaitable (asked before the slower inspect call).
_PLAIN = frozenset({str, int, float, bool, dict, list, tuple, type(None)})


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return _ENCODER(value)
    except (TypeError, ValueError):
        return str(value)


class Engine:
    """Runs agents for one kernel: the kernel's :class:`~soulacy.kernel.engine.Runner`."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.conversations = ConversationRegistry()
        self._shared: Workers | None = None  # in the kernel's nursery, while it is open
        self._detached: Workers | None = None  # outside runs of a kernel that is not open
        # The reservation caps of one configuration: ``config`` is replaced, never changed,
        # when the configuration changes (update_config), so they are read again then.
        self._caps: tuple[Settings, Capacity] | None = None
        self._keeper: ApprovalKeeper | Literal[False] | None = None  # asked on first use
        self.waiting_runs: Counter[str] = Counter()  # runs waiting for decisions, and how many

    # -- the runner's reservations -----------------------------------------------------------

    def reserve(self, request: RunRequest, *, exclusive: bool = False) -> RunHandle:
        if request.run_id is None or request.session_id is None:
            raise UsageError("a reservation is of a run id in a session: the request names both")
        return self._reserve(request, request.run_id, request.session_id, exclusive)

    def _reserve(
        self, request: RunRequest, run_id: str, session_id: str, exclusive: bool = False
    ) -> RunHandle:
        fingerprint = request_fingerprint(request.text, request.overrides)
        conversation = _conversation(request, session_id)
        return self.conversations.reserve(
            run_id, conversation, fingerprint, self._capacity(), exclusive=exclusive
        )

    def release(self, handle: RunHandle) -> None:
        self.conversations.release(handle)

    def holder(self, run_id: str) -> RunHandle | None:
        return self.conversations.holder(run_id)

    def cancel_run(self, run_id: str, reason: str = "cancelled") -> int:
        return self.conversations.cancel_run(run_id, reason)

    def cancel_conversation(self, conversation: ConversationKey, reason: str = "cancelled") -> int:
        return self.conversations.cancel_conversation(conversation, reason)

    async def request_cancel(self, run_id: str, reason: str = "cancelled") -> bool:
        return await request_cancel(self.kernel, self.conversations, run_id, reason)

    async def request_cancel_conversation(
        self, conversation: ConversationKey, reason: str = "cancelled"
    ) -> int:
        return await request_cancel_conversation(
            self.kernel, self.conversations, conversation, reason
        )

    async def continue_run(
        self, run_id: str, text: str = "", **options: Unpack[ContinueOptions]
    ) -> RunResult:
        return await continue_run(self.kernel, self.run, run_id, text, **options)

    def tools_for(self, agent: AgentSpec) -> list[Tool]:
        return tools_for(self.kernel, agent)

    def statistics(self) -> dict[str, int]:
        return self.conversations.statistics()

    def awaiting_decisions(self) -> frozenset[str]:
        return frozenset(self.waiting_runs)

    async def aclose(self) -> None:
        for workers in (self._shared, self._detached):
            if workers is not None:
                await workers.leases.aclose()
        self._shared = self._detached = None

    @property
    def leases(self) -> Leases:
        """The leases of the run the calling task belongs to, or of the open kernel."""
        workers = CURRENT.get()
        if workers is not None and workers.kernel is self.kernel:
            return workers.leases
        shared = self._workers()
        if shared is None:
            # Outside any run of a kernel that is not open (an operator command): leases are
            # taken and given back, not renewed. Fenced writes keep a hold longer than
            # ``leases.ttl`` from writing once it lapsed.
            if self._detached is None:
                self._detached = Workers(self.kernel, self.conversations, _nowhere)
            return self._detached.leases
        return shared.leases

    def _workers(self) -> Workers | None:
        """The shared workers while the kernel is open (None: it is not)."""
        kernel = self.kernel
        if not kernel.is_open:
            return None
        if self._shared is None:
            self._shared = Workers(kernel, self.conversations, kernel.start_soon)
        return self._shared

    def _capacity(self) -> Capacity:
        # Read at each reservation, not each turn: a PATCH of the caps applies to the next run
        # (it replaces ``config``, and with it what was read from the one before).
        config = self.kernel.config
        caps = self._caps
        if caps is not None and caps[0] is config:
            return caps[1]
        capacity = read_capacity(config)
        self._caps = (config, capacity)
        return capacity

    # -- runs --------------------------------------------------------------------------------

    async def run(self, request: RunRequest) -> RunResult:
        shared = self._workers()
        if shared is not None:
            return await self._run(request, shared)
        # A kernel that is not open: this run's background work runs in a nursery of its own.
        # What the run raises is raised as it is, not in an exception group; what a worker
        # raises comes out of the nursery.
        failure: Exception | None = None
        result: RunResult | None = None
        async with trio.open_nursery() as nursery:
            workers = Workers(self.kernel, self.conversations, starter(nursery))
            token = CURRENT.set(workers)
            try:
                result = await self._run(request, workers)
            except Exception as exc:
                failure = exc
            finally:
                CURRENT.reset(token)
                with trio.CancelScope(shield=True):  # what the store refused: once more
                    await workers.leases.aclose()
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert result is not None
        return result

    async def _run(self, request: RunRequest, workers: Workers) -> RunResult:
        kernel = self.kernel
        run_id = request.run_id or new_id()
        session_id = request.session_id or new_id()
        handle = request.reservation
        reserved = handle is not None  # by the caller, for this request or (wrongly) another
        if handle is None:
            handle = self._reserve(request, run_id, session_id)
        try:  # nothing is stored or published yet: a refusal gives the reservation back
            if reserved and (
                handle.run_id != run_id or handle.conversation != _conversation(request, session_id)
            ):
                raise UsageError(f"the reservation of run {handle.run_id!r} is for another request")
            agent = kernel.agent(request.agent_id)
            if not agent.section("enabled"):
                raise UsageError(
                    f"agent {request.agent_id!r} is disabled (enabled: false in {agent.file})"
                )
            policy: ExecutionPolicy = kernel.resolve_policy(request.agent_id, request.overrides)
        except BaseException:
            self.release(handle)
            raise
        run = EngineRun(self, workers, request, run_id, session_id, policy, agent)
        try:
            workers.cancel_watcher.ensure()
            with handle.scope:
                async with self.conversations.turn(handle):
                    await self._guarded(run, handle)
            if not run.life.ended:  # cancelled while queued for the conversation's turn
                self._finish(run, "cancelled", handle.cancel_reason or "cancelled")
                with trio.CancelScope(shield=True):
                    await self._complete(run)
        except trio.Cancelled:
            if not run.life.ended and kernel.stopping.is_set():  # queued when its kernel stopped
                self._finish(run, "interrupted", SHUTDOWN)
                with trio.CancelScope(shield=True):
                    await self._complete(run)
            raise
        finally:
            self.release(handle)
            run.let_go()
        return run.result

    async def _guarded(self, run: EngineRun, handle: RunHandle) -> None:
        """Drive the run under its conversation's lease, then store how it ended (still
        under the lease: the next turn of the conversation reads the whole of this one)."""
        try:
            run.held = await run.workers.leases.acquire(
                handle.conversation.lease_key(),
                holder=run.run_id,
                queue=True,
                on_lost=lambda: handle.scope.cancel(),
            )
            run.move(S.STARTING)
            # It has the thread again after waiting for its conversation's turn and lease:
            # its interval starts now (decision 0053), not when it queued. Timed from its
            # creation, a run that queued behind many others found its interval spent and
            # yielded after its first turn, each of them then live at once.
            run.last_yield = time.perf_counter()
            await self._drive(run, handle)
        except StorageError as exc:
            # A store that cannot read or write ends the run as failed, saying why; a failed
            # read is never taken for "no history". A lost lease says so.
            lost = isinstance(exc, LeaseLost)
            self._finish(run, "failed", "lease_lost" if lost else "storage_error", error=str(exc))
        except _IdentityRefused as exc:
            evidence = {"differs": exc.differs} if exc.differs else None
            self._finish(run, "failed", exc.reason, error=str(exc), evidence=evidence)
        except BaseException as exc:
            if run.result.finished_at == 0.0:
                if run.held is not None and run.held.lost:
                    self._finish(run, "failed", "lease_lost", error=str(run.held.error()))
                elif isinstance(exc, trio.Cancelled) and handle.scope.cancel_called:
                    self._finish(run, "cancelled", handle.cancel_reason or "cancelled")
                elif (
                    isinstance(exc, trio.Cancelled)
                    and self.kernel.stopping.is_set()
                    and run.state is not S.AWAITING_APPROVAL
                ):
                    # Cut by its kernel stopping (a server's drain ended): stored as far as
                    # it went and not finished, so that a same-id retry resumes it.
                    self._finish(run, "interrupted", SHUTDOWN)
                else:  # a parent's cancellation or an engine bug
                    cancelled = isinstance(exc, trio.Cancelled | KeyboardInterrupt)
                    if cancelled and run.state is S.AWAITING_APPROVAL:
                        # left as the store reads a crashed run, for a decision to resume it
                        run.move(S.SUSPENDED)
                        stopping = self.kernel.stopping.is_set()
                        self._finish(
                            run, "interrupted", SHUTDOWN if stopping else AWAITING_APPROVAL
                        )
                    else:
                        self._finish(
                            run,
                            "cancelled" if cancelled else "failed",
                            "cancelled by caller" if cancelled else None,
                            error=None if cancelled else f"{type(exc).__name__}: {exc}",
                        )
            raise
        finally:
            # A cancellation arriving now must not leave the run stored as running.
            with trio.CancelScope(shield=True):
                await self._complete(run)

    # -- the loop --------------------------------------------------------------------------

    async def _drive(self, run: EngineRun, handle: RunHandle) -> None:
        kernel, policy, request = self.kernel, run.policy, run.request
        agent = run.agent
        store = kernel.store()
        run.tools = {tool.name: tool for tool in self.tools_for(agent)}  # errors come first
        await self._check_identity(run, store)
        if not run.retry:
            # A fresh id is claimed in the store at once (insert-or-fail): of two requests
            # racing for it, on any process, the loser is refused before ``run.started``, so
            # a transport answers it 409 or 404 rather than a stream that ends failed. A retry
            # is recorded as its next attempt at its first turn: a strategy may refuse it
            # before that (a workflow step left in progress) and leave the run as it was.
            await self._claim(run, store)
        # Tool calls already executed under this run id (a retry after a crash) replay. A
        # fresh id's first attempt, just claimed, has none: the engine records a turn only
        # after the run's start.
        if run.retry or run.record.attempt > 1:
            for call_id, done in (await store.load_tool_records(run.run_id)).items():
                run.outcomes[call_id] = ToolOutcome(done.content, done.is_error)
        run.detector = _role(kernel, "soulacy_progress_detector", run)
        if run.detector is None and policy.no_progress_limit.value is not None:
            # The policy sets a stall limit: running without a detector would ignore it.
            required(None, "soulacy_progress_detector", "progress detection", "progress")
        key = handle.conversation  # the principal and user are part of the conversation
        history = await store.load_history(key.agent_id, key.session_id, key.principal, key.user_id)
        prompt = agent.section("system_prompt")
        messages = run.messages
        if prompt and not (history and history[0].role == "system"):
            messages.append(Message("system", prompt))
        messages.extend(history)
        run.first_new = run.recorded = len(messages)
        # Calls a crash cut while they ran (reserved, no result): settled before it goes on.
        cut, reserved = await cut_calls(run, store) if run.retry and history else ([], {})
        if history:
            answer_loaded(run, keep={call.id for call in cut})
        asked: Message | None = None
        if not request.continues:
            asked = Message("user", request.text)
        elif request.text or _ends_with_a_reply(messages):  # something to go on from
            asked = Message("user", request.text or CONTINUE_TEXT)
        if asked is not None and not cut:
            messages.append(asked)

        events = kernel.events
        if events.wants("run.started"):
            await self._emit(
                run,
                "run.started",
                {
                    "agent_id": run.agent_id,
                    "session_id": run.session_id,
                    "user_id": request.user_id,
                    "principal": request.principal,
                    "attempt": run.attempt_due,
                    "text": request.text,
                    **({"trace": dict(request.trace)} if request.trace else {}),
                },
            )
        if events.wants("run.limits"):
            await self._emit(run, "run.limits", policy.to_dict())
        # A plugin drives the run: a workflow, a reasoning strategy, or the trylast default,
        # the builtin ``classic`` plugin's tool loop.
        # Who takes part in its turns, asked once (docs/decisions/0061-per-run-participants.md).
        parts = run.participants = Participants.of(kernel, run)
        if run.detector is not None:
            parts.add(run.detector)
        strategy: RunStrategy = required(
            kernel.hook.soulacy_run_strategy(kernel=kernel, run=run),
            "soulacy_run_strategy",
            "the run strategy",
            "classic",
        )

        with trio.move_on_after(_seconds(policy.run_timeout)) as run_scope:
            run.timeout_scope = run_scope
            run.workers.watchdog.watch(run.clock, run_scope)  # its step and model calls end it
            try:
                if cut:  # their results go before the request's message, after their reply
                    await settle(self, run, cut, reserved)
                    if asked is not None:
                        messages.append(asked)
                await strategy(run)
            except RunStop as stop:
                self._finish(run, stop.status, stop.reason, stop.error, stop.evidence)
            finally:
                run.workers.watchdog.forget(run.clock)
        fired = run.clock.took(run_scope)
        if run_scope.cancelled_caught:
            # The run's own deadline first, as the outermost scope catches it.
            reason = fired[0] if fired and fired[1] < run_scope.deadline else "run_timeout"
            self._finish(run, "incomplete", reason)
        if not run.result.finished_at and run.state is not S.SUSPENDED:  # a strategy's bug
            self._finish(
                run,
                "failed",
                "no_ending",
                error="the run strategy returned without ending the run (run.complete or RunStop)",
            )
        if run.result.status == "completed":
            self._verify(run)

    async def _check_identity(self, run: EngineRun, store: ConversationStore) -> None:
        """A run id names one request: reusing it for another agent, session, user or
        principal is refused (it would mix two runs' history, records and proofs). An id read
        as free here may still be taken before the first turn (another process's request
        started it meanwhile): the store's ``start_run`` refuses it then (see ``_record``)."""
        existing = await store.get_run(run.run_id)
        # Read again here, under the conversation's lease: continued elsewhere meanwhile. A
        # continuation resumed after a crash (a decision resumes it) reads interrupted.
        if run.request.continues and (
            existing is None or existing.status not in ("incomplete", "interrupted")
        ):
            refused = RunNotContinuable(run.run_id, None if existing is None else existing.status)
            raise _IdentityRefused(str(refused), [], "not_continuable")
        if existing is None:
            return
        run.retry = True
        run.attempt_due = existing.attempt + 1
        differs = identity_differs(run.record, existing)
        if differs:
            taken = RunIdTaken(run.run_id, existing.principal, differs)
            raise _IdentityRefused(str(taken), differs)

    def _verify(self, run: EngineRun) -> None:
        """Evaluate declared outcome assertions; with none, completion stays unverified."""
        verdict: Verification | None = self.kernel.hook.soulacy_verify_outcome(
            kernel=self.kernel, run=run
        )
        if verdict is None:
            return
        result = run.result
        result.verification = verdict.status
        result.assertions = list(verdict.assertions)
        if verdict.status == "failed" and verdict.enforce == "fail":
            result.status = "failed"
            result.incomplete_reason = "outcome_failed"

    def _model(self, run: EngineRun) -> ModelSetup:
        """The provider, model, tool specs and compactor of a run (made on first use)."""
        if run.model_setup is None:
            kernel = self.kernel
            provider_name, model = kernel.providers.model_of(run.agent)
            compactor: Compactor = required(
                _role(kernel, "soulacy_compactor", run),
                "soulacy_compactor",
                "the compactor",
                "passthrough",
            )
            run.model_setup = ModelSetup(
                kernel.providers.provider(provider_name),
                provider_name,
                model,
                [tool.spec for tool in run.tools.values()],
                compactor,
                run.agent.section("llm"),
                _input_allowance(run.policy),
                getattr(compactor, "calibrate", None),
            )
            run.participants.add(compactor)  # it may announce its compactions, say
        return run.model_setup

    async def _yield(self, run: EngineRun) -> None:
        """Let other runs in: a cancellation is seen every turn, and the scheduler gets the
        thread back at least every YIELD_INTERVAL even when models and tools never block."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if time.perf_counter() - run.last_yield >= YIELD_INTERVAL:
            await trio.lowlevel.checkpoint()
            # Timed from when the run has the thread again: resumed after others' turns, it
            # may keep it a whole interval (not yield at once, every turn, under load).
            run.last_yield = time.perf_counter()

    def _check_budget(self, run: EngineRun, limit: Literal["turns", "steps"] = "turns") -> None:
        policy, result = run.policy, run.result
        if (
            limit == "turns"
            and policy.max_turns.value is not None
            and (result.turns >= policy.max_turns.value)
        ):
            raise RunStop("incomplete", "max_turns")
        steps = policy.reasoning_max_steps.value
        if limit == "steps" and steps is not None and result.turns >= steps:
            raise RunStop("incomplete", "max_steps")
        if policy.max_llm_calls.value is not None and (
            result.llm_calls >= policy.max_llm_calls.value
        ):
            raise RunStop("incomplete", "max_llm_calls")
        used = result.input_tokens + result.output_tokens
        if policy.max_tokens.value is not None and used >= policy.max_tokens.value:
            raise RunStop("incomplete", "max_tokens")

    async def _call_model(self, run: EngineRun, offer_tools: bool = True) -> Any:
        setup = self._model(run)
        provider, model, compactor = setup.provider, setup.model, setup.compactor
        specs = setup.specs if offer_tools else []
        llm, allowance = setup.llm, setup.allowance
        policy, result = run.policy, run.result
        retried = False
        reported: int | None = None  # the provider's own limit, once it has said it
        while True:
            try:
                view = compactor.compact(run.messages, allowance, specs)
            except ContextOverflow as exc:
                error = str(exc)
                if reported is not None:  # surface the provider's actual limit
                    error += f" (the provider's limit: {reported} tokens)"
                raise RunStop(
                    "failed",
                    "context_overflow",
                    error=error,
                    evidence={
                        "required": exc.required,
                        "allowance": exc.allowance,
                        "provider_limit": reported or exc.limit,
                    },
                ) from exc
            request = setup.request
            if request is None or request.messages is not view or request.tools is not specs:
                request = setup.request = ModelRequest(
                    messages=view,
                    tools=specs,
                    model=model,
                    max_output_tokens=policy.max_output_tokens.value,
                    temperature=llm.temperature,
                    top_p=llm.top_p,
                    tool_choice=llm.tool_choice,
                    stream=run.request.stream,
                )
            parts = run.participants
            refusal = parts.before_model_call and await parts.refusal(
                parts.before_model_call, run, request
            )
            if refusal:
                raise RunStop("incomplete", refusal)
            if self.kernel.events.wants("llm.call"):
                await self._emit(run, "llm.call", {"turn": result.turns, "messages": len(view)})
            started = time.perf_counter()
            result.llm_calls += 1
            sink = self._text_sink(run) if run.request.stream else None
            clock, seconds = run.clock, policy.llm_timeout.value
            try:
                if seconds is None or clock.model != INF:  # unlimited, or a concurrent call
                    with _move_on_after(policy.llm_timeout) as llm_scope:
                        reply = await provider.complete(request, sink)
                    if llm_scope.cancelled_caught:
                        raise RunStop("incomplete", "llm_timeout")
                else:  # the watchdog ends the run when the call outlasts its deadline
                    clock.model = clock.due(float(seconds))
                    try:
                        reply = await provider.complete(request, sink)
                    finally:
                        clock.model = INF
            except ContextLengthExceeded as exc:
                if retried or exc.limit is None:
                    raise RunStop("failed", "context_length", error=str(exc)) from exc
                retried, reported = True, exc.limit  # compact to the actual limit, retry once
                allowance = _refit(
                    max(0, exc.limit - (policy.max_output_tokens.value or 0)),
                    compactor,
                    view,
                    specs,
                    exc.requested,
                )
                continue
            except ProviderError as exc:
                raise RunStop("failed", "provider_error", error=str(exc)) from exc
            result.input_tokens += reply.usage.input_tokens
            result.output_tokens += reply.usage.output_tokens
            for after in run.participants.after_model_call:  # costs, usage, quotas
                after(run, reply, setup.provider_name, model)
            calibrate = setup.calibrate
            if calibrate is not None and reply.usage.input_tokens:
                calibrate(view, reply.usage.input_tokens)  # estimates learn from real usage
            if self.kernel.events.wants("llm.result"):
                await self._emit(
                    run,
                    "llm.result",
                    {
                        "turn": result.turns,
                        "input_tokens": reply.usage.input_tokens,
                        "output_tokens": reply.usage.output_tokens,
                        "finish_reason": reply.finish_reason,
                        "tool_calls": len(reply.message.tool_calls),
                        "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                    },
                )
            return _own_ids(reply)

    def _text_sink(self, run: EngineRun) -> Any:
        emit, run_id = self.kernel.events.emit, run.run_id  # one await per delta, not two

        async def sink(delta: str) -> None:
            await emit("text.delta", {"text": delta}, run_id)

        return sink

    async def _call_tool(self, run: EngineRun, call: ToolCall) -> ToolOutcome:
        result, tools, detector = run.result, run.tools, run.detector
        replayed = call.id in run.outcomes
        events = self.kernel.events
        if events.wants("tool.call"):
            await self._emit(
                run,
                "tool.call",
                {
                    "turn": result.turns,
                    "id": call.id,
                    "name": call.name,
                    "arguments": redact_arguments(call.arguments),
                    "replayed": replayed,
                },
            )
        if replayed:
            outcome = run.outcomes[call.id]  # a replayed id reuses its result and its status
        else:
            result.tool_calls += 1
            outcome = capped(await self._execute(run, tools, call), run.policy)
            run.outcomes[call.id] = outcome
            for after in run.participants.after_tool_call:
                after(run, call, outcome)
            run.pending_tools.append(
                # the call's arguments are the run's own copy (EngineRun.call_tool), not the
                # model's; redacted when stored (_record), with the history's copy of the call
                ToolRecord(
                    run.run_id,
                    call.id,
                    call.name,
                    call.arguments,
                    outcome.content,
                    outcome.is_error,
                )
            )
        verdict = _PROGRESS
        if detector is not None:
            # Structured results are judged by their value, so that volatile fields can be
            # dropped; a tool may declare its own normalizer.
            tool = tools.get(call.name)
            seen = outcome.content if outcome.is_error or outcome.value is None else outcome.value
            if tool is not None and tool.normalize is not None and outcome.value is not None:
                seen = tool.normalize(outcome.value)
            verdict = detector.observe(call.name, call.arguments, seen, outcome.is_error)
        content = outcome.content
        if verdict.warning:
            content = f"{content}\n\n[soulacy] {verdict.warning}"
        run.messages.append(
            Message(
                "tool", content, tool_call_id=call.id, name=call.name, is_error=outcome.is_error
            )
        )
        if events.wants("tool.result"):
            await self._emit(
                run,
                "tool.result",
                {
                    "id": call.id,
                    "name": call.name,
                    "is_error": outcome.is_error,
                    "replayed": replayed,
                    "verdict": verdict.kind,
                    "chars": len(outcome.content),
                    # events reach every subscriber and stream: a tool's output may quote a key
                    "preview": redact_text(outcome.content[:PREVIEW_CHARS]),
                },
            )
        if verdict.kind == "stalled":
            raise RunStop("incomplete", "no_progress", evidence=verdict.evidence)
        return outcome

    async def _execute(
        self, run: EngineRun, tools: Mapping[str, Tool], call: ToolCall
    ) -> ToolOutcome:
        tool = tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(tools)) or "none"
            return ToolOutcome(f"error: unknown tool {call.name!r} (available: {known})", True)
        if call.id.startswith(RESERVED_IDS):  # a strategy's id: the model's are rewritten
            return ToolOutcome(
                f"error: the call id {call.id!r} is reserved (it starts with"
                f" {', '.join(RESERVED_IDS)}); it did not run",
                True,
            )
        problems = tool.check_arguments(call.arguments)
        if problems:
            return ToolOutcome("error: invalid arguments: " + "; ".join(problems), True)
        parts = run.participants
        if parts.before_tool_call:  # every participant is asked, and any refusal wins
            refused = await parts.refusal(parts.before_tool_call, run, call)
            if refused:
                return ToolOutcome(f"error: {refused}", True)
        refusal = await self._ask_person(run, call) if parts.needs_approval else None
        if refusal is not None:
            return refusal
        if effects_of(run, tool) != "read":  # reserved in the store before it runs
            await reserve(self, run, call)
        try:
            with in_tool_call(ToolCallContext(run.run_id, call.id, call.name)):
                return await self._run_tool(run, tool, call)
        finally:
            run.under_way.pop(call.id, None)

    async def _run_tool(self, run: EngineRun, tool: Tool, call: ToolCall) -> ToolOutcome:
        timeout, clock = run.policy.tool_timeout, run.clock
        scope: trio.CancelScope | _NoDeadline
        if timeout.value is None or clock.tool_scope is not None:  # unlimited, or concurrent
            scope = _move_on_after(timeout)
        else:  # no deadline of its own (cheaper to enter): the watchdog cancels it
            scope = clock.tool_scope = trio.CancelScope()
            clock.tool = clock.due(float(timeout.value))
        run.begun.add(call.id)
        with scope:
            try:
                if tool.is_async:
                    value = await tool.function(**call.arguments)
                else:
                    # A plain function may block (files, HTTP, sleep): it runs in a worker
                    # thread so that other runs go on; on timeout the run stops waiting for it.
                    arguments = dict(call.arguments)
                    value = await trio.to_thread.run_sync(
                        lambda: tool.function(**arguments), abandon_on_cancel=True
                    )
                if type(value) not in _PLAIN and inspect.isawaitable(value):
                    value = await value
            except Exception as exc:
                return ToolOutcome(f"error: {type(exc).__name__}: {exc}", True)
            finally:
                if scope is clock.tool_scope:
                    clock.tool_scope, clock.tool = None, INF
            return ToolOutcome(_render(value), False, value)
        assert scope.cancelled_caught
        return ToolOutcome(f"error: tool {call.name!r} timed out after {timeout.value}s", True)

    async def _ask_person(self, run: EngineRun, call: ToolCall) -> ToolOutcome | None:
        """A participant's reasons for a person to decide the call: the approval keeper
        (``soulacy_approval_keeper``) obtains the decision. None: the call may run; else the
        refusal the model gets, or the result the keeper says the call had (it happened, it
        is not run). No keeper: refused, never run unapproved."""
        found = (ask(run, call) for ask in run.participants.needs_approval)
        reasons = [str(reason) for reason in found if reason]
        if not reasons:
            return None
        answer = await self.ask_keeper(run, call, reasons)
        if isinstance(answer, Happened):
            return ToolOutcome(answer.result, False)
        return None if answer is None else ToolOutcome(f"error: {answer}", True)

    async def ask_keeper(
        self, run: EngineRun, call: ToolCall, reasons: list[str]
    ) -> str | Happened | None:
        """The approval keeper's answer on ``call`` for ``reasons``: None when it may run,
        :class:`Happened` when it is not to run because it happened (its result given), else
        why not. No keeper: refused, never run unapproved."""
        keeper = self._keeper
        if keeper is None:
            found: ApprovalKeeper | None = self.kernel.hook.soulacy_approval_keeper(
                kernel=self.kernel
            )
            keeper = self._keeper = False if found is None else found
        if keeper is False:
            return (
                f"the call of tool {call.name!r} needs a person's approval"
                f" ({'; '.join(reasons)}) but no plugin keeps approvals (the builtin"
                " 'approvals' is not loaded); it did not run"
            )
        answer = await keeper.ask(run, call, reasons)
        if answer is None or isinstance(answer, Happened):
            return answer
        return str(answer)

    # -- endings ---------------------------------------------------------------------------

    def _finish(
        self,
        run: EngineRun,
        status: Status,
        reason: str | None = None,
        error: str | None = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> None:
        result = run.result
        if result.finished_at:
            return
        result.status = status
        result.incomplete_reason = reason if status != "completed" else None
        result.error = redact_text(error) if error else error  # a provider's text may hold keys
        result.evidence = evidence
        if status != "completed" and not result.reply:
            result.reply = _last_text(run.messages[run.first_new :])
        result.finished_at = time.time()

    async def _record(
        self,
        run: EngineRun,
        store: Store | None = None,
        state: StateRow | None = None,
        *,
        end: bool = False,
    ) -> ProofRecord | None:
        """Store the messages and tool calls not stored yet, in one step; with ``state``, that
        run-bound state row in the same step (the effect ledger's reservation); with ``end``,
        how the run ended (its result's metadata) and its proof, in the same step, the proof
        returned."""
        store = self.kernel.store() if store is None else store
        fence = run.fence()
        if run.state is S.STARTING:
            await self._claim(run, store)
        messages = run.messages[run.recorded :]
        if not messages and not run.pending_tools and not end:
            if state is not None:
                await store.save_state(state.key, state.value, fence, run_id=run.run_id)
            return None
        # The history and the proof keep tool calls' arguments redacted (this run's model and
        # tools still read them): a call's are redacted once for both, and its reservation.
        known = run.redactions
        stored = [redacted_calls(known, m) if m.tool_calls else m for m in messages]
        tools = [redacted_record(known, r) for r in run.pending_tools]
        proof = None
        if end:  # one commit where the store can (a store without ``ending=``: three)
            ending = Ending(run.result.metadata(), run.result.assertions)
            proof = await record_turn_and_end(store, run.record, stored, tools, fence, ending)
        elif state is None:
            await store.record_turn(run.record, stored, tools, fence)
        else:  # one commit where the store can (a store without ``state=``: two)
            await record_turn_and_state(store, run.record, stored, tools, fence, state)
        run.recorded = len(run.messages)
        run.pending_tools = []
        return proof

    async def _claim(self, run: EngineRun, store: Store) -> None:
        """Record the run as started, its next attempt; refused, nothing of it is stored."""
        try:
            # Insert-or-fail: of two processes starting one fresh id, one owns it.
            run.record = await store.start_run(run.record, run.fence())
        except RunIdTaken as taken:
            raise _IdentityRefused(str(taken), list(taken.differs)) from None
        run.result.attempt = run.record.attempt
        run.move(S.RUNNING)

    async def _complete(self, run: EngineRun) -> None:
        try:
            proof = await self._store_outcome(run)
        finally:
            if run.held is not None and run.state is S.UNSTORED and not run.held.lost:
                # The store refused how the run ended: the run keeps its lease (it reads
                # running, alive, not interrupted, while this process lives) until the lease
                # keeper stores the outcome, at a heartbeat when the store answers again.
                store = self.kernel.store()
                run.workers.leases.keep_until_written(
                    run.held,
                    lambda: self._store_unstored(run, store),
                    lambda lost: run.move(S.LOST if lost else S.INTERRUPTED),
                )
            elif run.held is not None:  # _complete always runs shielded (see its two callers)
                await run.workers.leases.release(run.held, shielded=True)
        if run.state is S.SUSPENDED:  # not ended: it resumes, as its next attempt, decided
            # How it stopped, as run.completed says how a run ended (a stream's ``result``).
            stopped = {**run.result.metadata(), "reply": run.result.reply}
            await self._emit(run, "run.suspended", {**stopped, "awaiting": run.awaiting})
            return
        summary = None if proof is None else {"sha256": proof.sha256, "receipts": proof.receipts}
        # The event's metadata is made only when someone reads it, before the proof is set
        # (the proof comes last in it, as it always has).
        wanted = self.kernel.events.wants("run.completed")
        metadata = run.result.metadata() if wanted else None
        run.result.proof = summary
        if run.participants.run_ended:
            await run.participants.ended(run)
        if metadata is not None:
            if summary is not None:
                metadata["proof"] = summary
            await self._emit(run, "run.completed", {**metadata, "reply": run.result.reply})

    async def _store_outcome(self, run: EngineRun) -> ProofRecord | None:
        # A run refused before its first turn stores nothing, except the retry that completes
        # without a turn (a workflow that restored every step): it is the run's next attempt.
        restored = run.retry and run.result.status == "completed"
        started = run.state in (S.RUNNING, S.AWAITING_APPROVAL, S.SUSPENDED)
        if not (started or (restored and run.state is S.STARTING)):
            # Before its first turn (refused, cancelled): nothing of it is stored; a lease
            # taken over before it began leaves it lost.
            held = run.held
            run.move(S.LOST if held is not None and held.lost else S.NOT_STORED)
            return None
        try:
            if run.state is not S.SUSPENDED:  # left as a crashed run: its retry answers it
                answer_cut(run)
            # Stored as far as it went; how it ends is its retry's. An interrupted run (its
            # process stopped) is left unfinished as a crashed attempt is: once its lease is
            # released it reads ``interrupted``, and a same-id retry is its next attempt.
            if run.state is S.SUSPENDED:
                await self._record(run)
                return None
            if run.result.status == "interrupted":
                await self._record(run)
                run.move(S.INTERRUPTED)
                return None
            # The last turn, how the run ended and its proof: one commit (the answer never
            # stored without the run's status, nor the status without the proof).
            proof = await self._record(run, end=True)
            run.move(S.FINISHED)
            return proof
        except StorageError as exc:
            # What could not be stored is said, never passed off as stored; the first
            # storage failure of the run is the one reported.
            if run.result.incomplete_reason not in ("storage_error", "lease_lost"):
                run.result.status = "failed"
                lost = isinstance(exc, LeaseLost)
                run.result.incomplete_reason = "lease_lost" if lost else "storage_error"
                run.result.error = str(exc)
            # Stored later, as the client is told (failed), unless fenced out or suspended (a
            # suspended run is left as a crashed one is, for its decision to resume it).
            if isinstance(exc, LeaseLost) or (run.held is not None and run.held.lost):
                run.move(S.LOST)
            elif run.state is not S.SUSPENDED:
                run.move(S.UNSTORED)
            return None

    async def _store_unstored(self, run: EngineRun, store: Store) -> None:
        """Store what :meth:`_store_outcome` could not, as the run's result says it ended
        (``failed``, ``storage_error``): the turn not stored yet, then its ending and proof,
        under its lease (the lease keeper's retry; a raise is retried at the next heartbeat)."""
        await self._record(run, store, end=True)
        run.move(S.FINISHED)

    async def _emit(self, run: EngineRun, type: str, data: Mapping[str, Any]) -> None:
        await self.kernel.events.emit(type, data, run_id=run.run_id)


# What a continued run is told when its conversation ends with the agent's reply and the
# caller gave no steering text (a model API wants a turn to answer).
CONTINUE_TEXT = "Continue."


def _ends_with_a_reply(messages: Sequence[Message]) -> bool:
    last = messages[-1] if messages else None
    return last is None or (last.role == "assistant" and not last.tool_calls)


def _role(kernel: Kernel, hook: str, run: EngineRun) -> Any:
    """The answer of a per-run factory hook; a plugin still implementing its deprecated
    ``soulacy_make_*`` name is asked first, as it was written to answer (for one release)."""
    old = getattr(kernel.hook, hook.replace("soulacy_", "soulacy_make_", 1))
    if old.get_hookimpls():
        answer = old(kernel=kernel, run=run)
        if answer is not None:
            return answer
    return getattr(kernel.hook, hook)(kernel=kernel, run=run)


def _conversation(request: RunRequest, session_id: str) -> ConversationKey:
    return ConversationKey(request.agent_id, session_id, request.principal, request.user_id)


# Of the allowance after a provider stated its limit: the compactor's estimate is no tokenizer,
# and the one retry must fit. The provider's count shrinks the allowance at most eightfold, so
# that a count of something else (a server's cached or multimodal input) cannot zero it.
REFIT_MARGIN = 0.9
REFIT_MIN_SCALE = 0.125


def _refit(
    allowance: int,
    compactor: Any,
    view: Sequence[Message],
    tools: Sequence[Any],
    counted: int | None,
) -> int:
    """The input allowance of the retry after the provider refused ``view`` as too long.

    When the provider said how many tokens it ``counted`` in ``view`` and the compactor can
    ``estimate(view, tools)`` (as the builtin one can), the allowance is scaled by estimate over
    count: a tokenizer that counts more than the estimate (llama.cpp's, for one) still gets a
    prompt that fits. A margin is kept either way.
    """
    estimate = getattr(compactor, "estimate", None)
    if counted and estimate is not None:
        estimated = estimate(view, tools)
        if 0 < estimated < counted:
            allowance = allowance * max(REFIT_MIN_SCALE, estimated / counted)
    return math.floor(allowance * REFIT_MARGIN)


def _input_allowance(policy: ExecutionPolicy) -> int | None:
    """Context window minus the output reservation, never negative; None when unknown."""
    window = policy.context_window.value
    if window is None:
        return None
    return max(0, window - (policy.max_output_tokens.value or 0))


def _last_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if message.role == "assistant" and message.content.strip():
            return message.content
    return ""


def _nowhere(*args: object, **kwargs: object) -> bool:
    """``start`` of workers that have no nursery: nothing is started."""
    return False


def _own_ids(reply: ModelReply) -> ModelReply:
    """``reply`` with each tool call whose id starts with one of :data:`RESERVED_IDS` given a
    fresh id, before anything of it is stored or run: the assistant message holds the new id,
    so the call's result (stored and sent back under the same id) still pairs with it."""
    calls = reply.message.tool_calls
    if not any(call.id.startswith(RESERVED_IDS) for call in calls):
        return reply  # the usual case: nothing copied
    own = tuple(
        attrs.evolve(call, id=f"call_{uuid.uuid4().hex}")
        if call.id.startswith(RESERVED_IDS)
        else call
        for call in calls
    )
    return attrs.evolve(reply, message=attrs.evolve(reply.message, tool_calls=own))
