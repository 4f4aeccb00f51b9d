"""The base of the shared store: what a store gives (connections, transactions, locks) and the
statements all of its roles use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from soulacy.kernel.store import EveryPrincipal, Lease, LeaseLost

from ._codecs import LEASE
from ._dialect import Connection, Dialect

C = TypeVar("C", bound=Connection)
T = TypeVar("T")
_FENCE = f"SELECT {LEASE.select()} FROM leases WHERE key = ?"


class SQLBase(Generic[C]):
    """A store over connections of type ``C``: a subclass runs each body on a connection of its
    own, a write in one transaction, and says how its database differs (``dialect``)."""

    dialect: ClassVar[Dialect]

    async def _read(self, what: str, body: Callable[[C], T]) -> T:
        """``body`` on a connection; ``what`` names it in a StorageError."""
        raise NotImplementedError

    async def _write(self, what: str, body: Callable[[C], T]) -> T:
        """``body`` in one write transaction, committed (or rolled back when it raises)."""
        raise NotImplementedError

    def _lock_run(self, conn: C, run_id: str) -> None:
        """Serialize, until the transaction ends, the writes of one run id that read then
        write (its start, its proof, its events). A store whose writers take one lock for the
        whole database (SQLite) has nothing to add."""

    def _now(self, conn: C) -> float:
        """The store's clock, read on ``conn``."""
        row = conn.execute(f"SELECT {self.dialect.now}").fetchone()
        return float(row[0])

    def _check_fence(self, conn: C, fence: Lease | None) -> None:
        """Inside the write's transaction: the lease's token still holds, else LeaseLost (the
        transaction rolls back, nothing is written). The row stays locked (``for_share``) until
        the write commits, so no takeover comes in between. An expired lease that nobody took
        over still holds."""
        if fence is None:
            return
        d = self.dialect
        row = conn.execute(d.sql(_FENCE + d.for_share), (fence.key,)).fetchone()
        if (
            row is None
            or int(LEASE.value(row, "token")) != fence.token
            or LEASE.value(row, "owner_id") != fence.owner.id
        ):
            current = LEASE.decode(row, key=fence.key, now=self._now(conn)) if row else None
            raise LeaseLost(fence.key, fence.token, current)


def principal_filter(
    d: Dialect, column: str, principal: str | EveryPrincipal | None
) -> tuple[list[str], list[Any]]:
    """The clause (none for every principal) and argument that keep one principal's rows:
    None matches only None."""
    if isinstance(principal, EveryPrincipal):
        return [], []
    return [f"{column} {d.same} ?"], [principal]
