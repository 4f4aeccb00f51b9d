"""Run logs shared through the store, so that any process serves any run's stream.

When several processes share the store (``Store.multi_process``: one SQLite file, one
PostgreSQL server), a client may reconnect with ``Last-Event-ID`` to another process than the
one running its run, behind a load balancer. So each process writes its runs' SSE events to
the store (``append_run_events``: batched, one transaction per :data:`FLUSH_EVERY`, bounded
like the in-memory log), and a process asked for the events of a run it does not run streams
them from there, woken by the store (PostgreSQL's NOTIFY; SQLite polls), until the ``result``.
A run whose process died never writes its ``result``: once the run reads ``interrupted`` (its
lease lapsed), the stream ends with the terminal event rebuilt from the run's record.

The shared copy is fenced by the lease of the run's attempt (``RunEventBatch.fence``): a
process stopped past its lease (SIGSTOP, a long pause) while another process retried its run
writes nothing into the retry's events once it resumes. The store refuses such a batch, and
the process stops sharing that log as soon as it is refused or its lease is found lost; its
own streams still get every event of its attempt, its ending included.
"""

from __future__ import annotations

import itertools
import logging
import operator
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from soulacy.kernel.store import RunEvent, RunEventBatch, RunEvents, StorageError, Store

from ._asgi import Send, sse, sse_text
from ._runlog import RunLog, SseEvent, json_of, missed_after

if TYPE_CHECKING:
    pass

log = logging.getLogger("soulacy.http")

FLUSH_EVERY = 0.02  # seconds events wait to be written together (what another process lags)
LIVENESS_EVERY = 2.0  # seconds of quiet after which a stored stream checks its run still runs
PAGE = 1000  # events read from the store at once
FINAL_FLUSH = 5.0  # seconds the last events may take to be written when the server stops
_LOG = operator.itemgetter(0)  # a pending event's log


class Publisher:
    """Writes the events appended to this process's run logs to the store, in order."""

    def __init__(self, store: Store, keep: int) -> None:
        self.store = store
        self.keep = keep
        self._pending: list[tuple[RunLog, SseEvent]] = []
        self._wake = trio.Event()
        self._written: weakref.WeakSet[RunLog] = weakref.WeakSet()  # logs begun in the store

    def add(self, log: RunLog, event: SseEvent) -> None:
        if log.unshared:
            return
        if not self._pending:  # the first of a flush wakes the writer; the rest wait with it
            self._wake.set()
        self._pending.append((log, event))

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                await trio.sleep(FLUSH_EVERY)
                await self.flush()
        finally:  # the runs' last events (their results) are written before the server stops
            with trio.CancelScope(shield=True), trio.move_on_after(FINAL_FLUSH):
                await self.flush()

    async def flush(self) -> None:
        pending, self._pending = self._pending, []
        self._wake = trio.Event()
        batches = []
        logs = []
        # consecutive events of one log make one batch (in C: a fast run's are most of them)
        for run_log, group in itertools.groupby(pending, key=_LOG):
            held = run_log.held
            if run_log.unshared:
                continue
            if held is not None and held.lost:  # taken over: its attempt's events stay here
                _unshare(run_log, "its lease was taken over (it was paused past it)")
                continue
            restart = run_log not in self._written  # a new log: a new attempt of the run
            self._written.add(run_log)
            stored = [RunEvent(e.id, e.name, e.data, e.json or _json(e)) for _, e in group]
            fence = held.lease if held is not None else None
            batches.append(RunEventBatch(run_log.run_id, run_log.principal, stored, restart, fence))
            logs.append(run_log)
        if not batches:
            return
        try:
            refused = await self.store.append_run_events(batches, self.keep)
        except StorageError as exc:  # this process's own streams still have them
            log.warning(
                "the events of %d runs were not shared with other processes: %s",
                len(batches),
                exc,
            )
            return
        if refused:  # None from a store written before the answer existed: all written
            _unshare_refused(logs, batches, set(refused))


def _unshare(run_log: RunLog, why: str) -> None:
    run_log.unshared = True
    log.warning(
        "run %s: %s: its events are no longer shared with other processes (this process's"
        " streams of it still get them)",
        run_log.run_id,
        why,
    )


def _unshare_refused(logs: list[RunLog], batches: list[RunEventBatch], refused: set[str]) -> None:
    """Stop sharing the logs whose batches the store refused: their fence is stale (a later
    attempt of their run began elsewhere, or another request owns the run id). Only a fenced
    batch is refused; of two logs of one run in a flush (a retry in this process), the
    earlier attempt's (the smaller token) is; a log alone is."""
    tokens: dict[str, set[int]] = {}
    for batch in batches:
        if batch.run_id in refused and batch.fence is not None:
            tokens.setdefault(batch.run_id, set()).add(batch.fence.token)
    for run_log, batch in zip(logs, batches, strict=True):
        found = tokens.get(batch.run_id)
        if found is None or batch.fence is None or run_log.unshared:
            continue
        if len(found) == 1 or batch.fence.token < max(found):
            _unshare(
                run_log,
                "the store refused them: the run's lease is no longer this attempt's (a later"
                " attempt began elsewhere, or another request owns the run id)",
            )


def _json(event: SseEvent) -> str | None:
    """The event's JSON, encoded here when no stream has written it yet (then a stream
    writes this text); None when JSON refuses the data: the store's own encoding then says
    so, as before (decision 0050)."""
    try:
        return json_of(event)
    except (ValueError, TypeError, RecursionError):
        return None


async def pump_stored(
    send: Send,
    store: Store,
    found: RunEvents,
    last_id: int,
    final: Callable[[], Awaitable[Mapping[str, Any] | None]],
) -> None:
    """Stream a run's stored events after ``last_id`` until its ``result``; when the run stops
    without one (its process died), ``final()`` gives the terminal event's data to end with
    (None while the run still runs)."""
    run_id = found.run_id
    while True:
        chunk = b""
        missed = missed_after(found.first_kept, last_id)
        if missed:
            reason = "events dropped from the run's bounded log"
            chunk += sse(None, "gap", {"missed": missed, "reason": reason})
        for event in found.events:  # the stored text when the store gives it: not re-encoded
            if event.json is None:
                chunk += sse(event.id, event.name, event.data)
            else:
                chunk += sse_text(event.id, event.name, event.json)
        if found.events:
            last_id = found.events[-1].id
        if chunk:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if found.events and found.events[-1].name == "result":
            return
        if len(found.events) < PAGE and not await store.wait_run_events(
            run_id, last_id, LIVENESS_EVERY
        ):
            result = await final()
            if result is not None:
                body = sse(result["id"], "result", result["data"])
                await send({"type": "http.response.body", "body": body, "more_body": True})
                return
            await send(
                {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
            )
        # None: swept away meanwhile (kept a day); the run's record then ends the stream
        again = await store.run_events(run_id, last_id, PAGE)
        if again is not None and again.principal != found.principal:
            return  # not the log this stream was allowed to read any more
        found = again or RunEvents(run_id, found.principal, last_id + 1, [])
