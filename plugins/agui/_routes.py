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

from soulacy.kernel import CapacityError, Kernel, RunIdInUse
from soulacy.plugins.http import HttpError, HttpRequest, HttpResponse

from ._input import RunInput, read_input
from ._runs import AguiRuns, RunLog
from ._translate import Translator

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
        try:
            handle = self.kernel.reserve_run(
                given.run_id,
                agent_id=agent_id,
                session_id=given.thread_id,
                principal=principal,
                text=given.text,
                exclusive=True,  # answer 409 at once rather than queue behind a live run
            )
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
            self._refuse_when_stopping()
            log = RunLog(Translator(given.thread_id, given.run_id, given.state), principal)
            log.add(log.translator.start(agent_id))
            self.runs.open(log)
            execute = self.runs.execute
            if not self.kernel.start_soon(execute, log, agent_id, given.text, handle):
                del self.runs.logs[given.run_id]
                raise HttpError(503, "the kernel is not open: AG-UI runs are not served")
        except BaseException:
            self.kernel.release_run(handle)
            raise
        return log

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
