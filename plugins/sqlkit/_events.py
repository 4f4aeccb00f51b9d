"""Run events and cancellation requests: the shared statements of the run event store.

A row of ``run_events`` holds several consecutive events of one run: those of one batch of an
append (docs/performance/0085). Its ``id`` is the first event it still holds (a row that
``keep`` cut into keeps its earlier events' text, skipped when read), ``last_id`` its last
event's, ``name`` its last event's name, and ``data`` the events: a JSON header (their ids,
names and the lengths of their texts), a newline, then the JSON array of their texts (a reader
decodes them in one call, and slices out the text a stream writes, decision 0050). A row
written before schema 14 (SQLite; 8 on PostgreSQL) has ``last_id`` NULL and holds one event,
its ``name`` and ``data`` as they are: both shapes are read.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from soulacy.kernel.store import CancelRequest, Lease, RunEvent, RunEventBatch, RunEvents

from ._base import C, SQLBase
from ._codecs import CANCEL, dumps

CANCEL_KEPT = 3600.0  # seconds a cancellation request is kept
RUN_EVENTS_KEPT = 86400.0  # seconds a run's stream event is kept
HOUSEKEEPING_EVERY = 600.0  # seconds between two sweeps of old stream events by one store
RUN_EVENTS = "soulacy_run_events"  # what an append announces (the run ids written)
CANCELS = "soulacy_cancel"  # what a cancellation request announces (its id)
READ_ROWS = 16  # rows of events a read takes at first (doubled while a page is not full)
LAST_ID = "COALESCE(last_id, id)"  # SQL: a row's last event (a row of one, written before 14)


def encode_events(events: Sequence[RunEvent]) -> str:
    """The ``data`` of one row holding ``events`` (in id order): a JSON header ``[ids, names,
    lengths]`` (``ids`` the first id when they follow each other, ``names`` the one name when
    they share it: a stream's deltas, made cheaply), a newline, then the JSON array of the
    events' texts (each the transport's own encoding when it gives it, decision 0050)."""
    texts = [e.json or dumps(e.data) for e in events]
    ids = [e.id for e in events]
    names = [e.name for e in events]
    first = ids[0]
    head = json.dumps(
        [
            first if ids == list(range(first, first + len(ids))) else ids,
            names[0] if len(set(names)) == 1 else names,
            list(map(len, texts)),
        ]
    )
    return "".join((head, "\n[", ",".join(texts), "]"))


def decode_events(row: Sequence[Any], after: int) -> Iterable[RunEvent]:
    """The events of a row (``id, last_id, name, data``) with an id greater than ``after``,
    from its ``id`` on: a row of several (``last_id`` set), or of one event written before
    schema 14 (``name`` and ``data`` its own). A read that starts inside the row skips ahead
    within it. Each event comes with its text as stored (a stream writes it as it is)."""
    first, last_id, name, data = int(row[0]), row[1], row[2], row[3]
    if last_id is None:
        if first > after:
            yield RunEvent(first, name, json.loads(data), data)
        return
    after = max(after, first - 1)
    end = data.index("\n")
    ids, names, lengths = json.loads(data[:end])
    count = len(lengths)
    if isinstance(ids, int):
        ids = range(ids, ids + count)
    if isinstance(names, str):
        names = [names] * count
    values = json.loads(data[end + 1 :])  # every event's data in one call
    at = end + 2
    for event_id, event_name, length, value in zip(ids, names, lengths, values, strict=True):
        if event_id > after:
            yield RunEvent(event_id, event_name, value, data[at : at + length])
        at += length + 1


class EventsMixin(SQLBase[C]):
    _events_swept_at: float = -math.inf  # time.monotonic() of the last sweep of old events

    def _lock_cancels(self, conn: C) -> None:
        """Make cancellation requests commit one at a time, in the order of their ids (a
        poller that saw id n then never misses a smaller id committed later). A store whose
        writers take one lock for the whole database has nothing to add."""

    def _announce(self, conn: C, channel: str, payload: str) -> None:
        """Tell the other processes, on commit, that ``channel`` has news (``payload``)."""

    def _announced(self) -> None:
        """After a commit that announced news: wake this process's own waiters."""

    # -- run events ------------------------------------------------------------------------------

    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> list[str]:
        sweep = time.monotonic() - self._events_swept_at >= HOUSEKEEPING_EVERY

        def write(conn: C) -> list[str]:
            if sweep:
                conn.execute(
                    self.dialect.sql(
                        f"DELETE FROM run_events WHERE created_at < {self.dialect.now} - ?"
                    ),
                    (RUN_EVENTS_KEPT,),
                )
            # One writer of a run's events at a time, and none while the run starts an
            # attempt (start_run takes the same lock): what a batch is judged by stays as read
            # until it commits. Taken in one order: two appends never deadlock.
            for run_id in sorted({b.run_id for b in batches}):
                self._lock_run(conn, run_id)
            refused: list[str] = []
            for batch in batches:
                if not self._append(conn, batch, keep) and batch.run_id not in refused:
                    refused.append(batch.run_id)
            for run_id in dict.fromkeys(b.run_id for b in batches if b.run_id not in refused):
                self._announce(conn, RUN_EVENTS, run_id)
            return refused

        refused = await self._write("append run events", write)
        if sweep:
            self._events_swept_at = time.monotonic()
        self._announced()
        return refused

    def _append(self, conn: C, batch: RunEventBatch, keep: int) -> bool:
        """One batch, inside the append's transaction; False: refused (the run's stored start
        is another request's, or a later attempt has begun)."""
        d = self.dialect
        newest = conn.execute(
            d.sql(
                f"SELECT principal, lease_token, {LAST_ID} FROM run_events WHERE run_id = ?"
                " ORDER BY id DESC LIMIT 1"
            ),
            (batch.run_id,),
        ).fetchone()
        fence = batch.fence
        started = None  # the run as stored: (principal, lease_key, lease_token)
        if fence is not None:
            started = conn.execute(
                d.sql("SELECT principal, lease_key, lease_token FROM runs WHERE run_id = ?"),
                (batch.run_id,),
            ).fetchone()
            if started is not None and started[1] not in (None, fence.key):
                return False  # another request's (its start of the stored id refused)
        # Another principal's events: never replaced, unless this is the stored run's own
        # batch and those were a refused request's, written before the run started.
        replacing = newest is not None and newest[0] != batch.principal
        if replacing and not (
            started is not None and fence is not None and started[0] == batch.principal
        ):
            return True  # left as they are, not refused
        written = None if replacing or newest is None else newest[1]
        if fence is not None and self._stale_events(conn, batch.run_id, fence, written, started):
            return False  # an attempt a later one replaced: nothing of it is written
        token = fence.token if fence is not None else None
        events = batch.events
        if batch.restart or replacing:
            conn.execute(d.sql("DELETE FROM run_events WHERE run_id = ?"), (batch.run_id,))
        elif events and newest is not None and events[0].id <= int(newest[2]):
            events = self._rewritten(conn, batch.run_id, events)
        if not events:
            return True
        # One row for the batch's events: what a row costs is paid once for all of them.
        conn.execute(
            d.sql(
                "INSERT INTO run_events (run_id, id, last_id, name, data, principal, created_at,"
                f" lease_token) VALUES (?, ?, ?, ?, ?, ?, {d.now}, ?)"
            ),
            (
                batch.run_id,
                events[0].id,
                events[-1].id,
                events[-1].name,
                d.text(encode_events(events)),
                batch.principal,
                token,
            ),
        )
        bound = batch.events[-1].id - keep  # the events up to this id are dropped
        if bound >= 1:
            self._trim(conn, batch.run_id, bound)
        return True

    def _rewritten(self, conn: C, run_id: str, events: Sequence[RunEvent]) -> list[RunEvent]:
        """A batch with ids already stored (no caller of the transport's does that): the
        events of the rows it reaches, the batch's replacing those of the same id, in id order;
        those rows are deleted (one row is written for them all)."""
        d = self.dialect
        reached = (run_id, events[0].id)
        rows = conn.execute(
            d.sql(
                "SELECT id, last_id, name, data FROM run_events"
                f" WHERE run_id = ? AND {LAST_ID} >= ?"
            ),
            reached,
        ).fetchall()
        merged = {e.id: e for row in rows for e in decode_events(row, 0)}
        merged.update((e.id, e) for e in events)
        conn.execute(d.sql(f"DELETE FROM run_events WHERE run_id = ? AND {LAST_ID} >= ?"), reached)
        return [merged[i] for i in sorted(merged)]

    def _trim(self, conn: C, run_id: str, bound: int) -> None:
        """Drop the run's events up to id ``bound``: the rows that hold none after it, and the
        start of the row that holds ``bound`` and more (its ``id`` moves past ``bound``: a read
        skips what it still holds before)."""
        d = self.dialect
        conn.execute(
            d.sql(f"DELETE FROM run_events WHERE run_id = ? AND id <= ? AND {LAST_ID} <= ?"),
            (run_id, bound, bound),
        )
        conn.execute(
            d.sql("UPDATE run_events SET id = ? WHERE run_id = ? AND id <= ? AND last_id > ?"),
            (bound + 1, run_id, bound, bound),
        )

    def _stale_events(
        self,
        conn: C,
        run_id: str,
        fence: Lease,
        written: int | None,
        started: Sequence[Any] | None,
    ) -> bool:
        """Whether a later attempt of the run has begun under a later grant of the fence's key.
        Its newest stored event was written (``written``), or it was started (``started``: the
        run's principal, lease_key, lease_token), under a greater token, or the run holds the
        key now under one (its next attempt took the lease over, and has not started yet; the
        lease row stays locked, ``for_share``, until the append commits)."""
        if written is not None and int(written) > fence.token:
            return True
        if started is not None and started[1] == fence.key and int(started[2] or 0) > fence.token:
            return True
        d = self.dialect
        held = conn.execute(
            d.sql(f"SELECT holder, token FROM leases WHERE key = ?{d.for_share}"), (fence.key,)
        ).fetchone()
        return held is not None and held[0] == run_id and int(held[1]) > fence.token

    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        d = self.dialect
        first_sql = d.sql(
            "SELECT id, principal FROM run_events WHERE run_id = ? ORDER BY id LIMIT 1"
        )
        # From the row that holds the event after ``after`` (the last row starting at or
        # before it, if it goes past it) on, in id order; the text as stored comes along: a
        # stream writes it without encoding it again.
        rows_sql = d.sql(
            "SELECT id, last_id, name, data FROM run_events WHERE run_id = ? AND id >= COALESCE("
            "(SELECT max(id) FROM run_events WHERE run_id = ? AND id <= ?), 0)"
            f" AND {LAST_ID} > ? ORDER BY id LIMIT ?"
        )

        def read(conn: C) -> RunEvents | None:
            first = conn.execute(first_sql, (run_id,)).fetchone()
            if first is None:
                return None
            events: list[RunEvent] = []
            start, wanted = after, max(1, min(READ_ROWS, limit))
            while len(events) < limit:  # rows hold a batch each: read more while not full
                rows = conn.execute(rows_sql, (run_id, run_id, start, start, wanted)).fetchall()
                for row in rows:
                    events.extend(decode_events(row, after))
                    if len(events) >= limit:
                        break
                if len(rows) < wanted:
                    break
                last = rows[-1]
                start = int(last[0] if last[1] is None else last[1])
                wanted = min(wanted * 2, max(1, limit))
            return RunEvents(run_id, first[1], int(first[0]), events[: max(0, limit)])

        return await self._read("read run events", read)

    def _newest_event(self, conn: C, run_id: str) -> int:
        """The id of the run's newest stored event (0: none)."""
        row = conn.execute(
            self.dialect.sql(
                f"SELECT {LAST_ID} FROM run_events WHERE run_id = ? ORDER BY id DESC LIMIT 1"
            ),
            (run_id,),
        ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    # -- cancellation requests -------------------------------------------------------------------

    async def request_cancel(
        self, reason: str, *, run_id: str | None = None, lease_key: str | None = None
    ) -> CancelRequest:
        d = self.dialect

        def write(conn: C) -> CancelRequest:
            self._lock_cancels(conn)
            conn.execute(
                d.sql(f"DELETE FROM cancel_requests WHERE created_at < {d.now} - ?"),
                (CANCEL_KEPT,),
            )
            row = conn.execute(
                d.sql(
                    "INSERT INTO cancel_requests (reason, run_id, lease_key, created_at)"
                    f" VALUES (?, ?, ?, {d.now}) RETURNING id"
                ),
                (d.text(reason), run_id, lease_key),
            ).fetchall()[0]  # all of it: a statement still under way cannot be committed
            self._announce(conn, CANCELS, str(row[0]))
            return CancelRequest(int(row[0]), reason, run_id, lease_key)

        request = await self._write("request cancel", write)
        self._announced()
        return request

    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        d = self.dialect
        sql = d.sql(
            f"SELECT {CANCEL.select()} FROM cancel_requests"
            f" WHERE id > ? AND created_at >= {d.now} - ? ORDER BY id"
        )

        def read(conn: C) -> list[CancelRequest]:
            return [CANCEL.decode(r) for r in conn.execute(sql, (after, CANCEL_KEPT)).fetchall()]

        return await self._read("read cancel requests", read)
