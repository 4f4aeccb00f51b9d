"""The base of the shared store: what a store gives (connections, transactions, locks) and the
statements all of its roles use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

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

    async def _statement(self, what: str, sql: str, args: Sequence[Any]) -> int:
        """``sql`` (in the driver's placeholders) with ``args``: one writing statement, its
        own transaction, with no ``BEGIN`` and ``COMMIT`` around it (one round trip, or one
        call into the database, instead of three), all or nothing as any statement is; how
        many rows it wrote. A store that cannot run a statement by itself runs it in a
        transaction (``_write``)."""
        return await self._write(what, lambda conn: int(conn.execute(sql, args).rowcount))

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

    def _fenced(self) -> str:
        """The condition of a write that is one statement under a lease (``_statement``): the
        lease's key, token and owner (three arguments, in that order) still hold. It locks the
        lease row as :meth:`_check_fence` does, so no takeover comes before the commit."""
        return (
            "EXISTS (SELECT 1 FROM leases WHERE key = ? AND token = ? AND owner_id = ?"
            f"{self.dialect.for_share})"
        )

    def _lease_lost(self, conn: C, fence: Lease) -> NoReturn:
        """After a fenced statement (:meth:`_fenced`) wrote nothing: LeaseLost, naming the
        lease's holder now."""
        self._check_fence(conn, fence)
        raise LeaseLost(fence.key, fence.token, None)  # not reached: tokens only grow


def principal_filter(
    d: Dialect, column: str, principal: str | EveryPrincipal | None
) -> tuple[list[str], list[Any]]:
    """The clause (none for every principal) and argument that keep one principal's rows:
    None matches only None."""
    if isinstance(principal, EveryPrincipal):
        return [], []
    return [f"{column} {d.same} ?"], [principal]
