"""The AG-UI runs of one kernel: each run's numbered events, live and after it ended.

A run started through AG-UI is followed here (:class:`Follow`): its events go to the AG-UI run that
carries it, the one that started it and, after each interrupt (a call waiting for approval), the
one that answered it. Each AG-UI run gets a log; the kernel events of that run (observed only for
the types this plugin translates, and only in kernels that serve it) are translated into it as they
come, and its end is written from the :class:`RunResult`. A finished log stays in memory (the last
:data:`FINISHED_KEPT`) and is written to the store's run events under ``agui:RUN_ID``, from where a
client that resumes after it left memory (or on another process of a shared store) still gets it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

from soulacy.kernel import Event, Kernel, RunHandle, RunResult
from soulacy.kernel.contracts import ApprovalKeeper
from soulacy.kernel.store import ApprovalRequest, RunEvent, RunEventBatch, StorageError
from soulacy.plugins.http import HttpError, StreamWriter

from ._translate import AguiEvent, Translator

logger = logging.getLogger("soulacy.agui")

TRANSLATED = ("text.delta", "tool.call", "tool.result", "llm.call", "tool.approval")
SUSPENDED = "awaiting_approval"  # the reason of a run the wait for a decision suspended
FINISHED_KEPT = 50  # finished logs kept in memory; older ones are read from the store
STORE_PREFIX = "agui:"  # the store's run events of a run's AG-UI log: apart from the HTTP API's
EVENT_NAME = "agui"  # the name of every stored event (the AG-UI type is in its data)
STORE_WAIT = 10.0  # seconds a finished run's events may take to be stored, the kernel stopping


def frame(event_id: int, event: AguiEvent) -> bytes:
    """One SSE event: its id (for ``Last-Event-ID``), and one line of JSON."""
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event_id}\ndata: {data}\n\n".encode()


def approval_keeper(kernel: Kernel) -> ApprovalKeeper:
    """The kernel's approval keeper (``soulacy_approval_keeper``): AG-UI decides interrupts
    and resumes their runs through its contract, never through another plugin's names. A 503
    when no plugin keeps approvals."""
    keeper: ApprovalKeeper | None = kernel.hook.soulacy_approval_keeper(kernel=kernel)
    if keeper is None:
        raise HttpError(503, "no plugin keeps approvals (the builtin 'approvals' is not loaded)")
    return keeper


class RunLog:
    """One AG-UI run's events, numbered from 1."""

    def __init__(self, translator: Translator, principal: str | None) -> None:
        self.translator = translator
        self.principal = principal
        # Its own id: the run's, or a resume's (the Soulacy run's events after an interrupt).
        self.run_id = translator.agui_run_id
        self.frames: list[bytes] = []  # what a stream sends, kept for the run's life here
        self._unstored: list[AguiEvent] = []  # the events themselves, until the store has them
        self.done = trio.Event()
        self._changed = trio.Event()  # set (and replaced) when events are added

    def add(self, events: Sequence[AguiEvent]) -> None:
        if self.done.is_set():
            return  # nothing follows a terminal event (lifecycle.mdx, "after a run closes")
        for event in events:
            self._unstored.append(event)
            self.frames.append(frame(len(self.frames) + 1, event))
        self._changed.set()
        self._changed = trio.Event()

    def end(self, events: Sequence[AguiEvent]) -> None:
        self.add(events)
        self.done.set()

    def after(self, last_id: int) -> bytes:
        return b"".join(self.frames[max(last_id, 0) :])

    def take_unstored(self) -> list[AguiEvent]:
        """The run's events, once it has ended, for the store (memory keeps only the frames)."""
        taken, self._unstored = self._unstored, []
        return taken

    async def follow(self, write: StreamWriter, last_id: int) -> None:
        """Write the events after ``last_id`` as they come, to the run's terminal event. What
        was added while a write was under way goes in the next write, all of it at once."""
        sent = max(last_id, 0)
        while True:
            changed = self._changed
            if sent < len(self.frames):
                ready = len(self.frames)
                await write(b"".join(self.frames[sent:ready]))
                sent = ready
            elif self.done.is_set():
                return
            else:
                await changed.wait()


Make = Callable[[Translator], Sequence[AguiEvent]]


class Follow:
    """One Soulacy run as AG-UI runs: the one that started it and, after each interrupt, the
    one that resumed it. Between an interrupt and its resume, the run's events wait here."""

    def __init__(self, translator: Translator, principal: str | None, agent_id: str) -> None:
        self.translator, self.principal, self.agent_id = translator, principal, agent_id
        self.log: RunLog | None = None  # the AG-UI run its events go to; None: interrupted
        self.backlog: list[Make] = []  # what happened since the interrupt
        self.final: Make | None = None  # how it ended, while no AG-UI run carries it
        self.pending: dict[str, Mapping[str, Any]] = {}  # calls waiting for a decision
        self.ended = False
        self.suspended = False  # the wait suspended it: a decision resumes it (a retry)

    @property
    def run_id(self) -> str:
        return self.translator.run_id

    def emit(self, make: Make) -> None:
        if self.log is not None:
            self.log.add(make(self.translator))
        else:
            self.backlog.append(make)

    def finish(self, make: Make) -> RunLog | None:
        """The run ended: its AG-UI run ends with it (returned, to store), or, interrupted,
        the end waits for the resume."""
        self.ended = True
        log, self.log = self.log, None
        if log is None:
            self.final = make
            return None
        log.end(make(self.translator))
        return log

    def interrupt(self) -> RunLog | None:
        """A call waits for a person: the AG-UI run ends with the interrupt outcome (returned,
        to store); the run goes on waiting, its next events kept for the resume."""
        log, self.log = self.log, None
        if log is not None:
            log.end(self.translator.interrupted(self.pending))
        return log

    def attach(self, log: RunLog) -> None:
        """``log`` (a resume's, begun) carries the run from here: what happened meanwhile, then
        the rest; it ends at once when the run ended, or waits for another decision."""
        backlog, self.backlog = self.backlog, []
        for make in backlog:
            log.add(make(self.translator))
        if self.final is not None:
            final, self.final = self.final, None
            log.end(final(self.translator))
        elif self.pending:
            log.end(self.translator.interrupted(self.pending))
        else:
            self.log = log


class AguiRuns:
    """The AG-UI logs of one kernel (kept in its stash), and the Soulacy runs they follow."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.logs: dict[str, RunLog] = {}  # by AG-UI run id
        self.follows: dict[str, Follow] = {}  # by Soulacy run id, while they run or wait
        # For the kernel's life, as the stash that holds this (only kernels that serve AG-UI).
        kernel.events.observe(self.observe, TRANSLATED)

    def open(self, log: RunLog) -> None:
        self.logs[log.run_id] = log
        finished = [run_id for run_id, kept in self.logs.items() if kept.done.is_set()]
        for run_id in finished[: max(0, len(finished) - FINISHED_KEPT)]:
            del self.logs[run_id]

    def follow(self, log: RunLog, agent_id: str) -> Follow:
        found = Follow(log.translator, log.principal, agent_id)
        found.log = log
        self.follows[found.run_id] = found
        return found

    def observe(self, event: Event) -> None:
        follow = self.follows.get(event.run_id or "")
        if follow is None or follow.ended:
            return  # another run (the HTTP API's, a workflow step's sub-run)
        data = event.data
        if event.type == "text.delta":
            text = str(data.get("text", ""))
            follow.emit(lambda t: t.text(text))
        elif event.type == "tool.call":
            call = (str(data["id"]), str(data["name"]), data["arguments"])
            follow.emit(lambda t: t.tool_call(*call))
        elif event.type == "tool.result":
            result = (str(data["id"]), str(data.get("preview", "")), bool(data.get("is_error")))
            follow.emit(lambda t: t.tool_result(*result))
        elif event.type == "llm.call":
            follow.emit(lambda t: t.model_called())
        elif event.type == "tool.approval":
            call_id = str(data["id"])
            follow.emit(lambda t: t.approval(call_id, data))
            if data.get("status", "pending") == "pending":
                follow.pending[call_id] = data
                self._store_soon(follow.interrupt())
            else:
                follow.pending.pop(call_id, None)

    def interrupted(
        self, principal_sees: Callable[[str | None], bool], thread_id: str
    ) -> dict[str, tuple[Follow, str]]:
        """The interrupts a principal may answer on a thread: by interrupt id, the run and call."""
        found = {}
        for follow in self.follows.values():
            if follow.log is not None or follow.ended:
                continue
            if not principal_sees(follow.principal) or follow.translator.thread_id != thread_id:
                continue
            for call_id in follow.pending:
                found[follow.translator.tool_call_id(call_id)] = (follow, call_id)
        return found

    async def execute(self, follow: Follow, text: str, handle: RunHandle) -> None:
        """Run it (in the kernel's nursery: the run is the server's, not the request's) and
        end its AG-UI run with how it ended."""
        translator = follow.translator
        await self._follow_to_end(
            follow,
            self.kernel.run(
                follow.agent_id,
                text,
                session_id=translator.thread_id,
                run_id=translator.run_id,
                principal=follow.principal,
                stream=True,
                reservation=handle,
            ),
        )

    async def resume_suspended(self, follow: Follow, request: ApprovalRequest) -> None:
        """The run the wait suspended, resumed by its decision (a same-id retry), followed on."""
        follow.suspended, follow.ended = False, False
        keeper = approval_keeper(self.kernel)
        await self._follow_to_end(follow, keeper.resume(request, stream=True))

    async def _follow_to_end(self, follow: Follow, running: Awaitable[RunResult]) -> None:
        ended: RunLog | None = None
        try:
            result = await running
        except Exception as exc:  # one run's failure must not end the kernel's background work
            logger.error("AG-UI run %s failed: %s", follow.run_id, exc, exc_info=exc)
            message = f"run {follow.run_id} failed: {exc}"
            ended = follow.finish(lambda t: t.fail(message))
        else:
            if result.incomplete_reason == SUSPENDED and follow.pending:
                follow.suspended = True  # not its end: the decision resumes it
            else:
                ended = follow.finish(lambda t: t.finish(result))
        finally:
            if not follow.ended and not follow.suspended:  # cancelled from outside: it stops
                ended = follow.finish(lambda t: t.stopped())
            if follow.ended:  # ended while interrupted (decided elsewhere): the HTTP API has it
                self.follows.pop(follow.run_id, None)
            # Shielded: a run cancelled by the kernel stopping is resumed from the store later.
            if ended is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(STORE_WAIT):
                    await self._store(ended)

    def _store_soon(self, log: RunLog | None) -> None:
        if log is not None:
            self.kernel.start_soon(self._store, log, name=f"store AG-UI run {log.run_id}")

    async def _store(self, log: RunLog) -> None:
        events = [RunEvent(n, EVENT_NAME, e) for n, e in enumerate(log.take_unstored(), 1)]
        batch = RunEventBatch(STORE_PREFIX + log.run_id, log.principal, events)
        try:
            await self.kernel.store().append_run_events([batch], keep=len(events))
        except StorageError as exc:  # memory still has it; only a later resume may miss it
            logger.warning("AG-UI run %s: its events were not stored: %s", log.run_id, exc)

    async def stored(self, run_id: str, last_id: int) -> tuple[str | None, bytes] | None:
        """A finished run's stored events after ``last_id`` as SSE, and its principal; None
        when the store has none of the run."""
        store, after = self.kernel.store(), last_id
        out: list[bytes] = []
        principal: str | None = None
        while True:
            page = await store.run_events(STORE_PREFIX + run_id, after, 1000)
            if page is None:
                return None if after == last_id else (principal, b"".join(out))
            principal = page.principal
            if not page.events:
                return principal, b"".join(out)
            for event in page.events:
                out.append(frame(event.id, dict(event.data)))
                after = event.id
