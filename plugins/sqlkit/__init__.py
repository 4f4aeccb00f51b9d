"""The SQL toolkit: what the SQL stores share, as a library (not a plugin).

The kernel defines what a store is (``soulacy.kernel.store``: the records, the store protocols
and their errors) and speaks no SQL. This module holds what the builtin SQLite store and the
contrib PostgreSQL store would otherwise each write again: a small :class:`Dialect` (the
placeholders, null-safe equality, the clock, the row locks: what truly differs), :class:`Codec`
(rows decoded into the kernel's records by column name), the retention steps of ``prune``, and
:class:`SQLStore`, a base class holding every statement both stores run alike, leaving the
connections, the transactions, the locks and the statements that truly differ (SQLite's turn
statement and WAL checkpoints, PostgreSQL's COPY and LISTEN/NOTIFY) to a subclass. Importing
it registers nothing.
"""

from ._codecs import (
    APPROVAL,
    CANCEL,
    HISTORY,
    LEASE,
    PROOF,
    RUN,
    RUN_EVENT,
    TOOL_RECORD,
    Codec,
    dumps,
    epoch,
    loads,
)
from ._dialect import POSTGRES, SQLITE, SQLITE_CLOCK, Connection, Cursor, Dialect, executemany
from ._events import (
    CANCEL_KEPT,
    CANCELS,
    HOUSEKEEPING_EVERY,
    RUN_EVENTS,
    RUN_EVENTS_KEPT,
    decode_events,
    encode_events,
)
from ._records import state_upsert
from ._retention import FINISHED, Schema, high_water, raise_high_water
from ._sqlite import is_wal
from ._store import SQLStore

__all__ = [
    "APPROVAL",
    "CANCEL",
    "CANCELS",
    "CANCEL_KEPT",
    "FINISHED",
    "HISTORY",
    "HOUSEKEEPING_EVERY",
    "LEASE",
    "POSTGRES",
    "PROOF",
    "RUN",
    "RUN_EVENT",
    "RUN_EVENTS",
    "RUN_EVENTS_KEPT",
    "SQLITE",
    "SQLITE_CLOCK",
    "TOOL_RECORD",
    "Codec",
    "Connection",
    "Cursor",
    "Dialect",
    "SQLStore",
    "Schema",
    "decode_events",
    "dumps",
    "encode_events",
    "epoch",
    "executemany",
    "high_water",
    "is_wal",
    "loads",
    "raise_high_water",
    "state_upsert",
]
