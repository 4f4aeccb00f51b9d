"""The AG-UI routes, as routes of the HTTP plugin (``soulacy_http_routes``).

- ``POST /api/v1/agui/{agent_id}``: a ``RunAgentInput``; the answer is the run as AG-UI events
  (``text/event-stream``, one JSON event per ``data:`` line, each with an ``id:``).
- ``GET /api/v1/agui/runs/{run_id}/events``: the run's events after ``Last-Event-ID`` (a
  Soulacy extension: AG-UI's SSE binding has no resumption); 204 when there are none left.

Both go through the HTTP plugin's guards (Host, Origin, keys and principals, body limits); a
principal sees only its own runs, and another's run is a 404, as in the HTTP API. The events are
sent as the run makes them (``HttpResponse.streamed``), as one of the principal's streams.
"""

from __future__ import annotations

import re
from functools import partial

from soulacy.kernel import CapacityError, Kernel, RunIdInUse, RunRequest
from soulacy.kernel.store import EVERY_PRINCIPAL
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

from ._input import RunInput, read_input
from ._runs import AguiRuns, RunLog, approval_keeper
from ._translate import AguiEvent, Translator, thread_messages

SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}
_DIGITS = re.compile(r"[0-9]{1,18}")


class AguiRoutes:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.runs = AguiRuns(kernel)

    async def run(self, request: HttpRequest) -> HttpResponse:
        self._refuse_when_stopping()
        agent_id = request.params["agent_id"]
        given = read_input(await request.json())
        if agent_id not in self.kernel.agent_ids():
            raise HttpError(404, f"no agent {agent_id!r}")
        if not self.kernel.agent(agent_id).section("enabled"):
            raise HttpError(409, f"agent {agent_id!r} is disabled")
        if given.resume:
            log = await self._resume(request, agent_id, given)
        else:
            log = await self._start(request, agent_id, given)
        return HttpResponse.streamed(partial(log.follow, last_id=0), SSE_HEADERS)

    async def events(self, request: HttpRequest) -> HttpResponse:
        run_id = request.params["run_id"]
        last_id = _last_event_id(request)
        log = self.runs.logs.get(run_id)
        if log is not None and request.sees(log.principal):
            if not log.done.is_set() or last_id < len(log.frames):
                return HttpResponse.streamed(partial(log.follow, last_id=last_id), SSE_HEADERS)
            body = b""
        else:
            stored = await self.runs.stored(run_id, last_id)
            if stored is None or not request.sees(stored[0]):
                raise HttpError(404, f"no AG-UI run {run_id!r}")
            body = stored[1]
        if not body:  # seen to its end: what stops a browser's EventSource
            return HttpResponse(204)
        return HttpResponse(200, body, SSE_HEADERS)

    async def _start(self, request: HttpRequest, agent_id: str, given: RunInput) -> RunLog:
        principal = request.principal
        run = RunRequest(
            agent_id,
            given.text,
            session_id=given.thread_id,
            run_id=given.run_id,
            principal=principal,
        )
        try:  # exclusive: answer 409 at once rather than queue behind a live run
            handle = self.kernel.runner().reserve(run, exclusive=True)
        except RunIdInUse as exc:
            if exc.owner == principal:
                raise HttpError(409, f"run {given.run_id!r} is still running") from None
            raise HttpError(404, f"no run {given.run_id!r}") from None  # another's: unsaid
        except CapacityError as exc:
            raise HttpError(429, str(exc), headers={"retry-after": "1"}) from None
        try:
            stored = await self.kernel.store().get_run(given.run_id)
            if stored is not None:
                if not request.sees(stored.principal):
                    raise HttpError(404, f"no run {given.run_id!r}")
                raise HttpError(409, f"run {given.run_id!r} exists: a new run needs a new runId")
            messages = await self._thread(agent_id, given, principal)
            self._refuse_when_stopping()
            log = RunLog(Translator(given.thread_id, given.run_id, given.state), principal)
            log.add(log.translator.start(agent_id, messages))
            self.runs.open(log)
            follow = self.runs.follow(log, agent_id)
            if not self.kernel.start_soon(self.runs.execute, follow, given.text, handle):
                del self.runs.logs[given.run_id]
                del self.runs.follows[given.run_id]
                raise HttpError(503, "the kernel is not open: AG-UI runs are not served")
        except BaseException:
            self.kernel.runner().release(handle)
            raise
        return log

    async def _resume(self, request: HttpRequest, agent_id: str, given: RunInput) -> RunLog:
        """A run that answers interrupts: each answer decides the tool call it names (the
        approvals plugin's decision, as ``/chat/confirm`` makes it), and the new AG-UI run
        carries the interrupted Soulacy run on from where it waited."""
        from soulacy.kernel import SoulacyError

        self._refuse_when_stopping()
        waiting = self.runs.interrupted(request.sees, given.thread_id)
        found = []
        for index, answer in enumerate(given.resume):
            if answer.interrupt_id not in waiting:  # another principal's reads as none
                raise HttpError(
                    404,
                    f"no interrupt {answer.interrupt_id!r} waits on thread {given.thread_id!r}",
                    {f"resume.{index}.interruptId": "expected an interrupt of this thread's run"},
                )
            found.append(waiting[answer.interrupt_id])
        follow = found[0][0]
        if any(f is not follow for f, _ in found) or follow.agent_id != agent_id:
            raise HttpError(
                422,
                "invalid AG-UI run input",
                {"resume": "expected answers to the interrupts of one run of this agent"},
            )
        if given.run_id in self.runs.logs or await self.kernel.store().get_run(given.run_id):
            raise HttpError(409, f"run {given.run_id!r} exists: a resume needs a new runId")
        approvals = approval_keeper(self.kernel)
        every = request.sees_everything
        resumes = []
        for answer, (_, call_id) in zip(given.resume, found, strict=True):
            try:
                decided = await approvals.decide(
                    follow.run_id,
                    call_id,
                    approved=answer.approved,
                    approver=request.principal or "agui",
                    decided_by=request.principal,
                    note=answer.note,
                    principal=EVERY_PRINCIPAL if every else request.principal,
                )
            except SoulacyError as exc:  # decided already, or the run ended meanwhile
                raise HttpError(409, str(exc)) from None
            if decided is None:  # pragma: no cover - its request is this principal's
                raise HttpError(404, f"no interrupt {answer.interrupt_id!r}")
            follow.pending.pop(call_id, None)
            if decided.resume:
                resumes.append(decided.request)
        if given.run_id in self.runs.logs:  # taken while the decisions were written
            raise HttpError(409, f"run {given.run_id!r} exists: a resume needs a new runId")
        log = RunLog(follow.translator, follow.principal)
        log.run_id = given.run_id
        log.add(follow.translator.resumed(given.run_id, given.state))
        self.runs.open(log)
        follow.attach(log)
        for suspended in resumes[:1]:  # one retry runs the suspended run on, past every call
            if not self.kernel.start_soon(self.runs.resume_suspended, follow, suspended):
                raise HttpError(503, "the kernel is not open: AG-UI runs are not served")
        return log

    async def _thread(
        self, agent_id: str, given: RunInput, principal: str | None
    ) -> list[AguiEvent] | None:
        """The thread so far, the principal's own conversation, read before the run adds to
        it, and the run's input last: the MESSAGES_SNAPSHOT of a thread that has messages (a
        new thread's are the client's own). The input has an id of the server's, as every
        message of the snapshot: a client merges a snapshot by id, keeping the order of the
        ids it already has, so no id it holds is reused and the snapshot's order is the one
        it ends with."""
        entries = await self.kernel.store().history(given.thread_id, agent_id, principal)
        if not entries:
            return None
        current = {"id": f"{given.run_id}:input", "role": "user", "content": given.text}
        return thread_messages(entries, current)

    def _refuse_when_stopping(self) -> None:
        if self.kernel.stopping.is_set():
            raise HttpError(
                503,
                "the server is shutting down: it takes no new run; retry on another server",
                headers={"retry-after": "5"},
            )


def _last_event_id(request: HttpRequest) -> int:
    value = request.headers.get("last-event-id", "")
    if not value:
        return 0
    if not _DIGITS.fullmatch(value):
        raise HttpError(
            400,
            "invalid Last-Event-ID",
            {"Last-Event-ID": "expected an event id: 1 to 18 ASCII digits"},
        )
    return int(value)
