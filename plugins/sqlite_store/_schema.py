"""The schema and its additive migrations; ``PRAGMA user_version`` records the version.

Version 1 is the original system's shape (``conversation_history`` without reply metadata,
``workflow_checkpoints``); a database it wrote has user_version 0 and upgrades in place. Every
migration only adds (``CREATE TABLE IF NOT EXISTS``, ``ALTER TABLE … ADD COLUMN`` for columns
that are missing), so running it twice changes nothing and no row is rewritten; version 6 also
removes what it replaces (the ``claims`` table, by leases; an index made redundant),
version 9 rebuilds the two tables written every turn (docs/decisions/0039), version 10
only adds columns: a tool record is kept in its tool result's history row
(docs/decisions/0047), and so does version 11: the lease tokens that fence a run's shared
stream events; version 12 adds what retention needs (docs/storage.md, Retention): the run a
plugin state belongs to, and the high-water mark of pruned lease tokens; version 13 only adds
a column: the result a person gave for a cut call that happened (docs/decisions/0081), and so
does version 14: a row of run events holds several (docs/performance/0085; the rows written
before hold one each and are read as they are). All
steps run in one
transaction: a failed migration leaves the file as it
was.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable

SCHEMA_VERSION = 14


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _add_columns(conn: sqlite3.Connection, table: str, columns: dict[str, str]) -> None:
    present = _columns(conn, table)
    for name, declaration in columns.items():
        if name not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute("""CREATE TABLE IF NOT EXISTS conversation_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT, workspace_id TEXT, subject TEXT,
        session_id TEXT, agent_id TEXT, role TEXT, content TEXT, tokens INTEGER,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)""")
    conn.execute("""CREATE TABLE IF NOT EXISTS workflow_checkpoints (
        agent_id TEXT, run_id TEXT, step_id TEXT, state TEXT, status TEXT,
        updated_at TIMESTAMP, PRIMARY KEY (run_id, step_id))""")


def _v2(conn: sqlite3.Connection) -> None:
    # The original system kept proofs in a table of another shape: keep it, under a new name.
    if "proofs" in _tables(conn) and "receipts" not in _columns(conn, "proofs"):
        conn.execute("ALTER TABLE proofs RENAME TO legacy_proofs")
    _add_columns(
        conn,
        "conversation_history",
        {
            "run_id": "TEXT",
            "metadata": "TEXT",
            "tool_call_id": "TEXT",
            "tool_calls": "TEXT",
            "name": "TEXT",
            "is_error": "INTEGER NOT NULL DEFAULT 0",
        },
    )
    _add_columns(conn, "workflow_checkpoints", {"evidence": "TEXT", "identity": "TEXT"})
    conn.execute(
        "CREATE INDEX IF NOT EXISTS history_by_conversation"
        " ON conversation_history (session_id, agent_id, id)"
    )
    conn.execute("CREATE INDEX IF NOT EXISTS history_by_run ON conversation_history (run_id)")
    conn.execute("""CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        user_id TEXT, principal TEXT, status TEXT NOT NULL, verification TEXT,
        incomplete_reason TEXT, metadata TEXT, started_at REAL NOT NULL, finished_at REAL)""")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_at)")
    conn.execute("""CREATE TABLE IF NOT EXISTS tool_records (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, call_id TEXT NOT NULL,
        name TEXT NOT NULL, arguments TEXT NOT NULL, content TEXT NOT NULL,
        is_error INTEGER NOT NULL, created_at REAL NOT NULL, UNIQUE (run_id, call_id))""")
    conn.execute("""CREATE TABLE IF NOT EXISTS proofs (
        run_id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at REAL NOT NULL)""")


def _v3(conn: sqlite3.Connection) -> None:
    conn.execute("""CREATE TABLE IF NOT EXISTS claims (
        key TEXT PRIMARY KEY, owner TEXT NOT NULL, pid INTEGER NOT NULL, host TEXT NOT NULL,
        acquired_at REAL NOT NULL, heartbeat_at REAL NOT NULL, took_over_from TEXT)""")


def _v4(conn: sqlite3.Connection) -> None:
    conn.execute("""CREATE TABLE IF NOT EXISTS superseded_proofs (
        run_id TEXT NOT NULL, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at REAL NOT NULL, superseded_at REAL NOT NULL)""")
    conn.execute("""CREATE TABLE IF NOT EXISTS plugin_state (
        key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL)""")


def _v5(conn: sqlite3.Connection) -> None:
    # The conversation key includes the principal and the user. Entries written by a run of
    # this project already name their run, whose record names both: fill the new columns from
    # it, so a conversation continues across the upgrade. The original system's entries have
    # no run and stay NULL (a conversation of no principal: the local operator's).
    _add_columns(conn, "conversation_history", {"principal": "TEXT", "user_id": "TEXT"})
    conn.execute(
        "UPDATE conversation_history SET (principal, user_id) ="
        " (SELECT principal, user_id FROM runs WHERE runs.run_id = conversation_history.run_id)"
        " WHERE run_id IS NOT NULL AND principal IS NULL AND user_id IS NULL"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS history_by_owner"
        " ON conversation_history (session_id, agent_id, principal, user_id, id)"
    )


def _v6(conn: sqlite3.Connection) -> None:
    # Leases replace claims. A row is kept once its key was ever granted: a release empties
    # the owner columns (owner_id NULL) and keeps the token, so a token is never granted twice.
    conn.execute("""CREATE TABLE IF NOT EXISTS leases (
        key TEXT PRIMARY KEY, token INTEGER NOT NULL, owner_id TEXT, pid INTEGER, host TEXT,
        boot TEXT, holder TEXT NOT NULL DEFAULT '', acquired_at REAL, renewed_at REAL,
        expires_at REAL)""")
    if "claims" in _tables(conn):
        # A claim had no expiry: it becomes a lease that expired at its last heartbeat (the
        # next asker takes it over, and learns whose it was).
        conn.execute(
            "INSERT OR IGNORE INTO leases (key, token, owner_id, pid, host, boot, holder,"
            " acquired_at, renewed_at, expires_at) SELECT key, 1, owner, pid, host, '', '',"
            " acquired_at, heartbeat_at, heartbeat_at FROM claims"
        )
        conn.execute("DROP TABLE claims")
    # The queue of a lease: arrival order is the ticket; a waiter keeps its place while it
    # asks again before expires_at.
    conn.execute("""CREATE TABLE IF NOT EXISTS lease_waiters (
        ticket INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, owner_id TEXT NOT NULL,
        holder TEXT NOT NULL, expires_at REAL NOT NULL, UNIQUE (key, owner_id, holder))""")
    conn.execute("CREATE INDEX IF NOT EXISTS lease_waiters_in_order ON lease_waiters (key, ticket)")
    conn.execute("""CREATE TABLE IF NOT EXISTS cancel_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL, run_id TEXT,
        lease_key TEXT, created_at REAL NOT NULL)""")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS cancel_requests_by_age ON cancel_requests (created_at)"
    )
    conn.execute("""CREATE TABLE IF NOT EXISTS counters (
        key TEXT PRIMARY KEY, total REAL NOT NULL, updated_at REAL NOT NULL)""")
    conn.execute("CREATE INDEX IF NOT EXISTS counters_by_age ON counters (updated_at)")
    # Attempts: the rows written before are each run's first attempt.
    _add_columns(conn, "runs", {"attempt": "INTEGER NOT NULL DEFAULT 1", "lease_key": "TEXT"})
    _add_columns(conn, "conversation_history", {"attempt": "INTEGER NOT NULL DEFAULT 1"})
    conn.execute(
        "CREATE INDEX IF NOT EXISTS history_by_attempt ON conversation_history (run_id, attempt)"
    )
    conn.execute("DROP INDEX IF EXISTS history_by_run")  # a prefix of history_by_attempt


def _v7(conn: sqlite3.Connection) -> None:
    # Each run's stream events, so that any process on the file serves a reconnecting stream.
    conn.execute("""CREATE TABLE IF NOT EXISTS run_events (
        run_id TEXT NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
        principal TEXT, created_at REAL NOT NULL, PRIMARY KEY (run_id, id)) WITHOUT ROWID""")
    conn.execute("CREATE INDEX IF NOT EXISTS run_events_by_age ON run_events (created_at)")


def _v8(conn: sqlite3.Connection) -> None:
    # Approval requests of tool calls and their decisions (docs/approvals.md): a run waits
    # for one durably, any process on the file decides it, once.
    conn.execute("""CREATE TABLE IF NOT EXISTS tool_approvals (
        run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, principal TEXT, user_id TEXT,
        request TEXT NOT NULL, reasons TEXT NOT NULL, requested_at REAL NOT NULL,
        approved INTEGER, approver TEXT, decided_by TEXT, note TEXT, decided_at REAL,
        PRIMARY KEY (run_id, call_id))""")
    conn.execute("CREATE INDEX IF NOT EXISTS tool_approvals_pending ON tool_approvals (approved)")


# The ending of an attempt that is no longer its run's last (the last one's is runs.metadata).
ATTEMPT_ENDINGS = """CREATE TABLE IF NOT EXISTS attempt_endings (
    run_id TEXT NOT NULL, attempt INTEGER NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (run_id, attempt)) WITHOUT ROWID"""

# The reply metadata of a history entry's attempt: the run's own for its last attempt, the
# stored ending for an earlier one. ``h`` is conversation_history, ``r`` its run (LEFT JOIN).
ATTEMPT_METADATA = (
    "CASE WHEN h.attempt = r.attempt THEN r.metadata ELSE (SELECT e.metadata"
    " FROM attempt_endings AS e WHERE e.run_id = h.run_id AND e.attempt = h.attempt) END"
)
# An entry's metadata as read: its own (the original system's entries, or an entry whose
# metadata is not its attempt's), else its attempt's.
ENTRY_METADATA = f"COALESCE(h.metadata, {ATTEMPT_METADATA})"
_AUTOINCREMENT = re.compile(r"\s+AUTOINCREMENT\b", re.IGNORECASE)


def _rebuild_without_autoincrement(
    conn: sqlite3.Connection, table: str, select: Callable[[str], str] = lambda n: f"h.{n}"
) -> None:
    """Copy ``table`` (as ``h``, with its run as ``r``) into a table of the same declaration
    without AUTOINCREMENT, ids kept and each column ``select(name)``, and put it in its place."""
    declaration = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()[0]
    names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    rebuilt = f"{table}_rebuilt"
    columns = _AUTOINCREMENT.sub("", declaration[declaration.index("(") :])
    conn.execute(f"CREATE TABLE {rebuilt} {columns}")
    conn.execute(
        f"INSERT INTO {rebuilt} ({', '.join(names)}) SELECT {', '.join(map(select, names))}"
        f" FROM {table} AS h LEFT JOIN runs AS r ON r.run_id = h.run_id ORDER BY h.rowid"
    )
    conn.execute(f"DROP TABLE {table}")  # its indexes and its sqlite_sequence row with it
    conn.execute(f"ALTER TABLE {rebuilt} RENAME TO {table}")


def _v9(conn: sqlite3.Connection) -> None:
    # Fewer pages per turn's commit (docs/decisions/0039): no AUTOINCREMENT on the two tables
    # written every turn (no row of either is ever deleted, so max(id) + 1 is as monotonic),
    # and of the history's indexes only the one its reads use. Reply metadata is kept once
    # per attempt instead of on every entry: an entry holding its attempt's loses its copy.
    conn.execute(ATTEMPT_ENDINGS)
    conn.execute(
        "INSERT OR IGNORE INTO attempt_endings (run_id, attempt, metadata)"
        " SELECT h.run_id, h.attempt, h.metadata FROM conversation_history AS h"
        " JOIN runs AS r ON r.run_id = h.run_id"
        " WHERE h.attempt < r.attempt AND h.metadata IS NOT NULL ORDER BY h.id"
    )
    _rebuild_without_autoincrement(
        conn,
        "conversation_history",
        lambda n: (
            f"CASE WHEN h.metadata IS {ATTEMPT_METADATA} THEN NULL ELSE h.metadata END"
            if n == "metadata"
            else f"h.{n}"
        ),
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS history_by_owner"
        " ON conversation_history (session_id, agent_id, principal, user_id, id)"
    )
    _rebuild_without_autoincrement(conn, "tool_records")


def _v10(conn: sqlite3.Connection) -> None:
    # A turn's tool record is kept in its tool result's history row (docs/decisions/0047): a
    # commit dirties the history and its index only, not tool_records and its unique index.
    # ``record_arguments`` is not NULL on a row holding a record; ``record_content`` only when
    # the record's differs from the message's (a progress warning appended to the message).
    _add_columns(
        conn,
        "conversation_history",
        {"record_arguments": "TEXT", "record_content": "TEXT", "record_created_at": "REAL"},
    )
    # Where a run's records in the history start: every entry of the run has a greater id
    # (NULL for a run started before: all its records are in tool_records, none in history).
    _add_columns(conn, "runs", {"first_history_id": "INTEGER"})
    # A record kept apart (an approval receipt, a record without its tool message): it comes
    # after the history entry of this id, and before the next (NULL: before every entry).
    _add_columns(conn, "tool_records", {"after_history_id": "INTEGER"})


def _v11(conn: sqlite3.Connection) -> None:
    # A run's stream events are fenced by its attempt's lease (docs/storage.md, run events):
    # the token of the lease the run's current attempt was started under, and of the lease
    # each stored event was written under (NULL: not fenced, or written before 11). A batch
    # of an attempt that a later one replaced (a greater token) is refused.
    _add_columns(conn, "runs", {"lease_token": "INTEGER"})
    _add_columns(conn, "run_events", {"lease_token": "INTEGER"})


# The portal kept each run's limits under this key before state could name its run.
_PORTAL_LIMITS = "portal.run_limits:"


def _v12(conn: sqlite3.Connection) -> None:
    # Retention (docs/storage.md): a plugin state may belong to a run, and goes with it.
    _add_columns(conn, "plugin_state", {"run_id": "TEXT"})
    conn.execute(
        "UPDATE plugin_state SET run_id = substr(key, ?) WHERE substr(key, 1, ?) = ?"
        " AND run_id IS NULL",
        (len(_PORTAL_LIMITS) + 1, len(_PORTAL_LIMITS), _PORTAL_LIMITS),
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS plugin_state_by_run ON plugin_state (run_id)"
        " WHERE run_id IS NOT NULL"
    )
    # The greatest token of any pruned lease row: a key granted again starts above it, so
    # no token of a key is ever granted twice (one row; none until a lease is pruned).
    conn.execute(
        "CREATE TABLE IF NOT EXISTS lease_high_water (id INTEGER PRIMARY KEY CHECK (id = 1),"
        " token INTEGER NOT NULL)"
    )
    # Old rows found by age. Not the history: written every turn, it gets no index more
    # (decision 0039); its old rows are found by id, which grows with time.
    conn.execute("CREATE INDEX IF NOT EXISTS runs_by_finish ON runs (finished_at)")
    conn.execute("CREATE INDEX IF NOT EXISTS proofs_by_age ON proofs (created_at)")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS superseded_proofs_by_age ON superseded_proofs (superseded_at)"
    )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS superseded_proofs_by_run ON superseded_proofs (run_id)"
    )


def _v13(conn: sqlite3.Connection) -> None:
    # A call cut by a crash can be told it happened (docs/decisions/0081): the result the
    # person gave, kept with the decision (NULL: none given, every decision made before 13).
    _add_columns(conn, "tool_approvals", {"result": "TEXT"})


def _v14(conn: sqlite3.Connection) -> None:
    # A row of run events holds a batch of a run's events (docs/performance/0085): ``id`` is
    # the first it holds, ``last_id`` the last (NULL: a row of one event, written before 14,
    # read as it is).
    _add_columns(conn, "run_events", {"last_id": "INTEGER"})


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _v1,
    _v2,
    _v3,
    _v4,
    _v5,
    _v6,
    _v7,
    _v8,
    _v9,
    _v10,
    _v11,
    _v12,
    _v13,
    _v14,
)


def refuse_newer(version: int) -> None:
    """A file of a newer schema is never written (nor read) by this code: its layout is not
    the one this code writes, and a write could hide what the newer code keeps."""
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"the file is at schema {version}, written by a newer Soulacy (this one knows up to"
            f" {SCHEMA_VERSION}); nothing was changed: open it with that version or newer"
        )


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to ``SCHEMA_VERSION`` in one transaction; returns the old version."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        refuse_newer(int(version))
        for number, step in enumerate(MIGRATIONS, start=1):
            if version < number:
                step(conn)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return int(version)
