"""Each run's SSE events, kept so that a client that reconnects misses nothing.

Fed by the kernel's event stream (the ``soulacy_event`` hook), read by any number of streams.
A stream holds only an index into its run's log, so a slow client costs no memory of its own;
the log itself is bounded (``server.events_per_run``), and the terminal ``result`` event is
always kept. Finished runs stay available for ``server.finished_runs_kept`` more runs.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio

from soulacy.kernel import Event
from soulacy.kernel.store import Lease

from ._asgi import sse_text, to_json

# kernel event type -> SSE event name (what the stream shows)
STREAMED = {
    "run.started": "run",
    "run.limits": "run.limits",
    "text.delta": "delta",
    "tool.call": "tool.call",
    "tool.result": "tool.result",
    "tool.approval": "tool.approval",  # a call waits for a person's decision, then has it
    "workflow.step": "workflow.step",
    "run.completed": "result",
    "run.suspended": "result",  # it stopped, waiting for a decision that resumes it
}


# Event ids go on across a run's attempts: attempt n's log begins after (n - 1) times this, so
# that a client that saw attempt 1 and reconnects with its last id is sent all of attempt 2
# (its ids restarting at 1 hid those up to that id, the result included). A billion events
# an attempt, and some nine million attempts, before REPLAYED_RESULT_ID (2**53 - 1).
ATTEMPT_IDS = 10**9


def attempt_base(event_id: int) -> int:
    """The id after which the log of the attempt of ``event_id`` begins."""
    return (max(event_id, 1) - 1) // ATTEMPT_IDS * ATTEMPT_IDS


def missed_after(first_kept: int, last_id: int) -> int:
    """How many events of the current attempt a reader that saw ``last_id`` can no longer get
    (dropped from a long run's log, below ``first_kept``). Those of an earlier attempt are not
    missed: that attempt is over, and this one is sent from its start."""
    return max(0, first_kept - max(last_id, attempt_base(first_kept)) - 1)


@attrs.define
class SseEvent:
    id: int
    name: str
    data: Mapping[str, Any]
    # the event as the wire carries it, encoded by the first stream that writes it and kept
    # for every other (decision 0043); None until then: a run nobody streams encodes nothing
    frame: bytes | None = attrs.field(default=None, repr=False, eq=False)
    # its data's JSON text, kept with the frame: the store's shared copy writes this text
    # rather than encoding the data again (decision 0050)
    json: str | None = attrs.field(default=None, repr=False, eq=False)


def json_of(event: SseEvent) -> str:
    """The event's data as JSON, encoded once for its frame and its stored copy (data JSON
    refuses raises json's error here)."""
    if event.json is None:
        event.json = to_json(event.data)
    return event.json


def frame_of(event: SseEvent) -> bytes:
    """The event's bytes on the wire, encoded once for all the streams of its run (an event
    JSON refuses raises here, in the stream that writes it, as it always did)."""
    if event.frame is None:
        event.frame = sse_text(event.id, event.name, event.json or json_of(event))
    return event.frame


class HeldLease(Protocol):
    """The lease a run holds (``Run.held``): renewed in place, ``lost`` once a renewal found
    it taken over."""

    lease: Lease
    lost: bool


@attrs.define(eq=False)
class RunLog:
    run_id: str
    principal: str | None
    limit: int
    events: list[SseEvent] = attrs.Factory(list)
    first_kept: int = 1  # ids below this were dropped from a long run's log
    next_id: int = 1
    result: SseEvent | None = None
    # told of every event appended (the store's shared copy, when processes share the store)
    publish: Callable[[RunLog, SseEvent], None] | None = None
    # the lease the run's attempt holds, when the store's shared copy is written: it fences
    # that copy (a later attempt of the run, in another process, refuses it)
    held: HeldLease | None = None
    # no more of its events go to the store's shared copy: its attempt lost its lease, or a
    # later attempt of the run replaced it there (its own streams still get every event)
    unshared: bool = False
    _changed: trio.Event | None = attrs.field(default=None, init=False)
    # what wait_appended's callers wait for: set at the append of the lowest id asked
    _appended: trio.Event | None = attrs.field(default=None, init=False)
    _appended_at: int = attrs.field(default=0, init=False)

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def changed(self) -> trio.Event:
        """Set by the next append. Made when a reader asks: an append that nobody waits for
        (most, while a stream sends the previous ones) makes none."""
        if self._changed is None:
            self._changed = trio.Event()
        return self._changed

    async def wait_appended(self, event_id: int) -> None:
        """Return once the event ``event_id`` was appended, or the run finished: a stream that
        gathers (``_gather.gathered``) sleeps through the appends until then, woken once. The
        streams of a run share one event, set at the lowest id any of them waits for: a stream
        woken before its own id waits again."""
        while self.next_id <= event_id and self.result is None:
            if self._appended is None:
                self._appended = trio.Event()
                self._appended_at = event_id
            elif event_id < self._appended_at:
                self._appended_at = event_id
            await self._appended.wait()

    def begin_attempt(self, attempt: int) -> None:
        """Number this log as attempt ``attempt``'s (see ATTEMPT_IDS), before its first event."""
        if not self.events and self.result is None and attempt > 1:
            self.next_id = self.first_kept = (attempt - 1) * ATTEMPT_IDS + 1

    def append(self, name: str, data: Mapping[str, Any]) -> None:
        event = SseEvent(self.next_id, name, data)
        self.next_id += 1
        if name == "result":
            self.result = event  # kept apart: never dropped
        else:
            self.events.append(event)
            if len(self.events) > self.limit + self.limit // 4:  # trim in chunks: O(1) amortized
                del self.events[: len(self.events) - self.limit]
                self.first_kept = self.events[0].id
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()
        appended = self._appended
        if appended is not None and (event.id >= self._appended_at or name == "result"):
            self._appended = None
            appended.set()
        if self.publish is not None:
            self.publish(self, event)

    def after(self, last_id: int) -> tuple[int, list[SseEvent]]:
        """(how many events after ``last_id`` were dropped, the kept ones after it)."""
        missed = missed_after(self.first_kept, last_id)
        events = self.events[bisect.bisect_right(self.events, last_id, key=_id) :]
        if self.result is not None and self.result.id > last_id:
            events.append(self.result)
        return missed, events


class RunLogs:
    """The logs of current and recently finished runs of one kernel."""

    def __init__(self, events_per_run: int = 10_000, finished_kept: int = 1000) -> None:
        self.events_per_run = events_per_run
        self.finished_kept = finished_kept
        self._logs: OrderedDict[str, RunLog] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()  # finished logs' ids, oldest first
        self.publish: Callable[[RunLog, SseEvent], None] | None = None  # see RunLog.publish

    def open(self, run_id: str, principal: str | None) -> RunLog:
        log = self._logs.get(run_id)
        if log is None or log.finished:  # a retry with the same run id starts a new log
            log = RunLog(run_id, principal, self.events_per_run, publish=self.publish)
            self._logs[run_id] = log
        return log

    def _replace(self, run_id: str, principal: str | None) -> RunLog:
        log = RunLog(run_id, principal, self.events_per_run, publish=self.publish)
        self._logs[run_id] = log
        self._logs.move_to_end(run_id)
        return log

    def get(self, run_id: str) -> RunLog | None:
        return self._logs.get(run_id)

    def hold(self, run_id: str, held: HeldLease | None) -> None:
        """The run ``run_id``, whose ``run.started`` was just observed, holds ``held``: its
        log's shared copy is written under it."""
        log = self._logs.get(run_id)
        if log is not None and not log.finished and log.held is None:
            log.held = held

    def observe(self, event: Event) -> None:
        name = STREAMED.get(event.type)
        if name is None or event.run_id is None:
            return
        log = self._logs.get(event.run_id)
        # A log holds one run of one principal. A run started elsewhere (a workflow step, the
        # scheduler) gets a log of its own, and so does an event with no live log (a refused
        # attempt's result): never is anything appended to another run's finished log, which
        # may belong to another principal who chose that run id first.
        if event.type == "run.started":
            principal = event.data.get("principal")
            if log is None or log.finished or log.principal != principal:
                log = self._replace(event.run_id, principal)
            log.begin_attempt(event.data.get("attempt", 1))
        elif log is None or log.finished:
            log = self._replace(event.run_id, event.data.get("principal"))
        refused = name == "result" and event.data.get("incomplete_reason") == "identity_mismatch"
        if refused:
            # Refused as another request's (in a race with another process too): nothing of
            # it is stored, and its id is the stored run's. None of its events is shared any
            # more (the store's copy is that run's); its streams keep the log, and a later
            # lookup of the id reads the store, never this log.
            log.unshared = True
        log.append(name, _data(name, event))
        if name == "result":
            if refused:
                del self._logs[event.run_id]
            else:
                self._keep_finished(event.run_id)

    def _keep_finished(self, run_id: str) -> None:
        """Keep the ``finished_kept`` logs that finished last (for reconnections): one
        eviction per finished run, never a scan of every log."""
        self._done[run_id] = None
        self._done.move_to_end(run_id)
        while len(self._done) > self.finished_kept:
            oldest, _ = self._done.popitem(last=False)
            log = self._logs.get(oldest)
            if log is not None and log.finished:  # not a retry's live log under that id
                del self._logs[oldest]


def _id(event: SseEvent) -> int:
    return event.id


def _data(name: str, event: Event) -> Mapping[str, Any]:
    data = dict(event.data)
    if name == "run":
        return {
            "run_id": event.run_id,
            "session_id": data.get("session_id"),
            "agent_id": data.get("agent_id"),
            "attempt": data.get("attempt", 1),
        }
    if name == "result":
        reply = data.pop("reply", "")
        return {
            "reply": reply,
            "run_id": event.run_id,
            "session_id": data.get("session_id"),
            "status": data.get("status"),
            "verification": data.get("verification"),
            "metadata": data,
        }
    return data
