"""Leases with their queues, and retention: the shared statements of the lease store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs
import trio

from soulacy.kernel.store import Lease, LeaseGrant, LeaseOwner, Pruned, RetentionLimits

from . import _retention
from ._base import C, SQLBase
from ._codecs import LEASE


class LeasesMixin(SQLBase[C]):
    retention: ClassVar[_retention.Schema]

    def _lease_to_grant(self, conn: C, key: str) -> tuple[Lease | None, int, float]:
        """Inside ``acquire_lease``'s transaction, with what makes it the only one deciding
        ``key`` (a lock): the lease as it is, the token a grant would get (greater than any
        token of the key, released and pruned ones included: never reused), and the time."""
        raise NotImplementedError

    def _pruned(self, total: Pruned) -> None:
        """After a prune that deleted ``total``: forget what no longer is."""

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        d = self.dialect

        def write(conn: C) -> LeaseGrant:
            current, token, now = self._lease_to_grant(conn, key)
            if current is not None and (current.owner.id, current.holder) == (owner.id, holder):
                # Ours already (expired or not, nobody took it): renewed, the same token.
                conn.execute(
                    d.sql("UPDATE leases SET renewed_at = ?, expires_at = ? WHERE key = ?"),
                    (now, now + ttl, key),
                )
                self._leave_queue(conn, key, owner.id, holder)
                renewed = attrs.evolve(current, renewed_at=now, expires_at=now + ttl, expired=False)
                return LeaseGrant(True, renewed)
            live = current is not None and not current.expired and not current.owner.provably_gone()
            # Free with nobody queued (a conversation's lease, nearly always): granted as the
            # queue would grant it (its only waiter, none ahead), without writing a waiter's
            # row to delete it at once. A row of the key (ours, another's, a lapsed one) means
            # the queue decides.
            queued = queue and (live or self._has_waiters(conn, key))
            ahead = self._wait_in_queue(conn, key, owner.id, holder, now, ttl) if queued else 0
            if live:
                return LeaseGrant(False, current, ahead=ahead)
            if ahead:
                return LeaseGrant(False, None, ahead=ahead)  # free, but served in arrival order
            conn.execute(
                d.sql(
                    "INSERT INTO leases (key, token, owner_id, pid, host, boot, holder,"
                    " acquired_at, renewed_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (key) DO UPDATE SET token = excluded.token,"
                    " owner_id = excluded.owner_id, pid = excluded.pid, host = excluded.host,"
                    " boot = excluded.boot, holder = excluded.holder,"
                    " acquired_at = excluded.acquired_at, renewed_at = excluded.renewed_at,"
                    " expires_at = excluded.expires_at"
                ),
                (
                    key,
                    token,
                    owner.id,
                    owner.pid,
                    owner.host,
                    owner.boot,
                    holder,
                    now,
                    now,
                    now + ttl,
                ),
            )
            if queued or not queue:  # a row of ours may be left from an earlier wait
                self._leave_queue(conn, key, owner.id, holder)
            lease = Lease(key, owner, token, holder, now, now, now + ttl)
            return LeaseGrant(True, lease, took_over_from=current)

        return await self._write("acquire lease", write)

    def _has_waiters(self, conn: C, key: str) -> bool:
        """Whether the queue of ``key`` has a row (live or lapsed), read deciding ``key``
        alone."""
        sql = self.dialect.sql("SELECT 1 FROM lease_waiters WHERE key = ? LIMIT 1")
        return conn.execute(sql, (key,)).fetchone() is not None

    def _wait_in_queue(
        self, conn: C, key: str, owner_id: str, holder: str, now: float, ttl: float
    ) -> int:
        """Join (or keep a place in) the queue of ``key``; returns how many live waiters are
        ahead. Waiters that stopped asking (expired) lose their place. Called deciding ``key``
        alone, so the queue of a key changes one transaction at a time."""
        d = self.dialect
        conn.execute(
            d.sql("DELETE FROM lease_waiters WHERE key = ? AND expires_at <= ?"), (key, now)
        )
        conn.execute(
            d.sql(
                "INSERT INTO lease_waiters (key, owner_id, holder, expires_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (key, owner_id, holder)"
                " DO UPDATE SET expires_at = excluded.expires_at"
            ),
            (key, owner_id, holder, now + ttl),
        )
        row = conn.execute(
            d.sql(
                "SELECT COUNT(*) FROM lease_waiters WHERE key = ? AND ticket < (SELECT ticket"
                " FROM lease_waiters WHERE key = ? AND owner_id = ? AND holder = ?)"
            ),
            (key, key, owner_id, holder),
        ).fetchone()
        return int(row[0]) if row else 0

    def _leave_queue(self, conn: C, key: str, owner_id: str, holder: str) -> None:
        conn.execute(
            self.dialect.sql(
                "DELETE FROM lease_waiters WHERE key = ? AND owner_id = ? AND holder = ?"
            ),
            (key, owner_id, holder),
        )

    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        if not leases:
            return []
        ordered = sorted(leases, key=lambda lease: lease.key)  # rows locked in one order
        d = self.dialect
        # One reading of the clock for both columns.
        sql = d.sql(
            f"UPDATE leases SET renewed_at = n.t, expires_at = n.t + ? FROM (SELECT {d.now} AS t)"
            " AS n WHERE key = ? AND token = ? AND owner_id = ?"
            " RETURNING leases.renewed_at, leases.expires_at"
        )

        def write(conn: C) -> list[Lease]:
            kept: dict[int, Lease] = {}
            for lease in ordered:
                # all of it: a statement still under way cannot be committed (SQLite)
                rows = conn.execute(sql, (float(ttl), lease.key, lease.token, lease.owner.id))
                for row in rows.fetchall():
                    renewed = attrs.evolve(
                        lease, renewed_at=float(row[0]), expires_at=float(row[1]), expired=False
                    )
                    kept[id(lease)] = renewed
            return [kept[id(lease)] for lease in leases if id(lease) in kept]

        return await self._write("renew leases", write)

    async def release_lease(self, lease: Lease) -> None:
        sql = self.dialect.sql(
            "UPDATE leases SET owner_id = NULL, pid = NULL, host = NULL, boot = NULL,"
            " holder = '', acquired_at = NULL, renewed_at = NULL, expires_at = NULL"
            " WHERE key = ? AND token = ? AND owner_id = ?"
        )

        def write(conn: C) -> None:
            # The row stays, with its token, so that the next grant's token is greater.
            conn.execute(sql, (lease.key, lease.token, lease.owner.id))
            self._leave_queue(conn, lease.key, lease.owner.id, lease.holder)

        await self._write("release lease", write)

    async def get_lease(self, key: str) -> Lease | None:
        d = self.dialect
        sql = d.sql(f"SELECT {LEASE.select()}, {d.statement_now} FROM leases WHERE key = ?")

        def read(conn: C) -> Lease | None:
            row = conn.execute(sql, (key,)).fetchone()
            return LEASE.decode(row, key=key, now=float(row[-1])) if row else None

        return await self._read("read lease", read)

    # -- retention -------------------------------------------------------------------------------

    async def prune(self, limits: RetentionLimits) -> Pruned:
        """Delete what ``limits`` no longer keeps, a batch per transaction (``_retention``),
        by the store's clock."""
        total = Pruned()
        now = await self._read("prune", self._now)
        for step in _retention.steps(self.retention, limits, now):
            more = True
            while more:
                counts, more = await self._write("prune", step)
                total = _retention.add(total, counts)
                await trio.lowlevel.checkpoint()  # runs write between two batches
        self._pruned(total)
        return total
