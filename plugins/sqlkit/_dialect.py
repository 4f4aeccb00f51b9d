"""What differs between SQLite and PostgreSQL in the statements both stores share."""

from __future__ import annotations

from typing import Any, Protocol

import attrs


class Cursor(Protocol):
    """What the shared statements use of a DB-API cursor (sqlite3's and psycopg's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def executemany(self, sql: str, rows: Any, /) -> Any: ...

    def close(self) -> None: ...


class Connection(Protocol):
    """What the shared statements use of a connection: ``sqlite3.Connection`` and
    ``psycopg.Connection`` both are one."""

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...

    def cursor(self) -> Any: ...


@attrs.frozen
class Dialect:
    """How one database spells what the shared statements need.

    A shared statement is written with ``?`` placeholders and these attributes put in with an
    f-string (``f"… principal {d.same} ?"``); :meth:`sql` gives it in the database's own
    placeholders. Everything else in the shared statements is SQL both databases read alike
    (``ON CONFLICT … DO UPDATE``, ``RETURNING``, ``UPDATE … FROM``, ``TRUE``).
    """

    name: str
    placeholder: str  # of the driver: "?" (sqlite3) or "%s" (psycopg)
    same: str  # null-safe equality: NULL matches NULL only
    now: str  # epoch seconds, read inside the transaction (the store's clock)
    statement_now: str  # the same, fixed for the whole statement (judging many leases alike)
    greatest: str  # the two-argument maximum
    row_id: str  # a row's own address, in a table without an id column
    insertion_order: str  # the order rows were inserted in (approvals, checkpoints)
    for_share: str  # the lock a fenced write holds on the lease row it checked
    for_update: str  # the lock a read-then-write takes on the row it reads
    skip_locked: str  # rows a prune batch deletes: locked, leaving those in use to the next
    nul_in_text: bool  # whether a text value may hold NUL characters
    _rendered: dict[str, str] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def sql(self, text: str) -> str:
        """``text`` with the driver's placeholders (made once per text)."""
        if self.placeholder == "?":
            return text
        found = self._rendered.get(text)
        if found is None:
            found = text.replace("%", "%%").replace("?", self.placeholder)
            self._rendered[text] = found
        return found

    def text(self, value: str) -> str:
        """``value`` as the database keeps it: where text cannot hold NUL, each is U+FFFD."""
        if self.nul_in_text or "\x00" not in value:
            return value
        return value.replace("\x00", "\ufffd")


# SQLite's clock is the host's: the store registers ``soulacy_now()`` (``time.time``) on each
# connection, so a statement reads it inside its transaction as PostgreSQL reads its own.
SQLITE = Dialect(
    name="sqlite",
    placeholder="?",
    same="IS",
    now="soulacy_now()",
    statement_now="soulacy_now()",
    greatest="max",
    row_id="rowid",
    insertion_order="rowid",
    for_share="",  # BEGIN IMMEDIATE holds the one writer lock: no row lock to take
    for_update="",
    skip_locked="",
    nul_in_text=True,
)
POSTGRES = Dialect(
    name="postgresql",
    placeholder="%s",
    same="IS NOT DISTINCT FROM",
    now="extract(epoch FROM clock_timestamp())::float8",  # the server's clock
    statement_now="extract(epoch FROM statement_timestamp())::float8",
    greatest="GREATEST",
    row_id="ctid",
    insertion_order="seq",  # an identity column: tables have no rowid
    for_share=" FOR SHARE",
    for_update=" FOR UPDATE",
    skip_locked=" FOR UPDATE SKIP LOCKED",
    nul_in_text=False,
)
SQLITE_CLOCK = "soulacy_now"  # the name of the function SQLITE.now calls


def executemany(conn: Connection, sql: str, rows: Any) -> None:
    """``sql`` once per row, on a cursor of its own (psycopg's connections have no
    ``executemany``)."""
    cursor = conn.cursor()
    try:
        cursor.executemany(sql, rows)
    finally:
        cursor.close()
