"""Run events and cancellation requests: the shared statements of the run event store."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from soulacy.kernel.store import CancelRequest, Lease, RunEventBatch, RunEvents

from ._base import C, SQLBase
from ._codecs import CANCEL, RUN_EVENT, dumps

CANCEL_KEPT = 3600.0  # seconds a cancellation request is kept
RUN_EVENTS_KEPT = 86400.0  # seconds a run's stream event is kept
HOUSEKEEPING_EVERY = 600.0  # seconds between two sweeps of old stream events by one store
RUN_EVENTS = "soulacy_run_events"  # what an append announces (the run ids written)
CANCELS = "soulacy_cancel"  # what a cancellation request announces (its id)


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
                "SELECT principal, lease_token FROM run_events WHERE run_id = ?"
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
        if batch.restart or replacing:
            conn.execute(d.sql("DELETE FROM run_events WHERE run_id = ?"), (batch.run_id,))
        cursor = conn.cursor()
        try:
            cursor.executemany(
                d.sql(
                    "INSERT INTO run_events (run_id, id, name, data, principal, created_at,"
                    f" lease_token) VALUES (?, ?, ?, ?, ?, {d.now}, ?)"
                    " ON CONFLICT (run_id, id) DO UPDATE SET name = excluded.name,"
                    " data = excluded.data, principal = excluded.principal,"
                    " created_at = excluded.created_at, lease_token = excluded.lease_token"
                ),
                [
                    # the transport's own encoding when it gives it (decision 0050)
                    (
                        batch.run_id,
                        e.id,
                        e.name,
                        d.text(e.json or dumps(e.data)),
                        batch.principal,
                        token,
                    )
                    for e in batch.events
                ],
            )
            if batch.events:
                cursor.execute(
                    d.sql("DELETE FROM run_events WHERE run_id = ? AND id <= ?"),
                    (batch.run_id, batch.events[-1].id - keep),
                )
        finally:
            cursor.close()
        return True

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
        # the text as stored comes along: a stream writes it without encoding it again
        rows_sql = d.sql(
            f"SELECT {RUN_EVENT.select(json='data')} FROM run_events WHERE run_id = ? AND id > ?"
            " ORDER BY id LIMIT ?"
        )

        def read(conn: C) -> RunEvents | None:
            first = conn.execute(first_sql, (run_id,)).fetchone()
            if first is None:
                return None
            rows = conn.execute(rows_sql, (run_id, after, limit)).fetchall()
            return RunEvents(run_id, first[1], int(first[0]), [RUN_EVENT.decode(r) for r in rows])

        return await self._read("read run events", read)

    def _newest_event(self, conn: C, run_id: str) -> int:
        """The id of the run's newest stored event (0: none)."""
        row = conn.execute(
            self.dialect.sql("SELECT max(id) FROM run_events WHERE run_id = ?"), (run_id,)
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
