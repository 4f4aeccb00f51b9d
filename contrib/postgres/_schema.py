"""The PostgreSQL schema and its migrations, recorded in ``soulacy_schema``.

Each migration is a numbered list of statements; ``soulacy_schema`` has one row per version
applied (its number, what it did, when, by the server's clock). Versions 1-3 only added tables,
columns and indexes; version 4 keeps reply metadata once per attempt instead of on every history
entry (docs/decisions/0045), which a process of an earlier release does not read: every such
process must stop before the first of this release opens the database. Version 5 only adds two
columns (the lease tokens that fence a run's shared stream events); version 6 adds what
retention needs (docs/storage.md, Retention); version 7 only adds a column (the result a
person gave for a cut call that happened, docs/decisions/0081), and so does version 8 (a row of
run events holds several, docs/performance/0085; the rows written before hold one each and
are read as they are). A database at a version
newer than :data:`SCHEMA_VERSION` is refused and left as it is (:func:`refuse_newer`): its
layout may not be the one this code reads and writes. Migrations run at start-up, in one
transaction, under a transaction-scoped advisory lock of the database
(``pg_advisory_xact_lock``): processes starting at once migrate one after the other, and every
one but the first finds nothing left to do. PostgreSQL's DDL is transactional, so a migration
that fails leaves nothing half done.

Tables hold the same rows as the SQLite store's (``soulacy.plugins.sqlite_store``); times are
epoch seconds (``double precision``), JSON documents are kept as text, exactly as written.
"""

from __future__ import annotations

from typing import Any

import attrs
import psycopg

SCHEMA_TABLE = "soulacy_schema"
# The advisory lock of migrations: one 64-bit key per database ("soulacy" + 1, in ASCII).
MIGRATION_LOCK = 0x736F756C61637901


@attrs.frozen
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


_V1 = (
    """CREATE TABLE IF NOT EXISTS conversation_history (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, run_id TEXT,
        role TEXT NOT NULL, content TEXT NOT NULL, tokens INTEGER,
        created_at DOUBLE PRECISION NOT NULL, metadata TEXT, tool_call_id TEXT, tool_calls TEXT,
        name TEXT, is_error BOOLEAN NOT NULL DEFAULT FALSE, principal TEXT, user_id TEXT,
        attempt INTEGER NOT NULL DEFAULT 1)""",
    "CREATE INDEX IF NOT EXISTS history_by_owner"
    " ON conversation_history (session_id, agent_id, principal, user_id, id)",
    "CREATE INDEX IF NOT EXISTS history_by_attempt ON conversation_history (run_id, attempt)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        user_id TEXT, principal TEXT, status TEXT NOT NULL, verification TEXT,
        incomplete_reason TEXT, metadata TEXT, started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION, attempt INTEGER NOT NULL DEFAULT 1, lease_key TEXT)""",
    "CREATE INDEX IF NOT EXISTS runs_by_start ON runs (started_at)",
    "CREATE INDEX IF NOT EXISTS runs_by_agent ON runs (agent_id, started_at)",
    """CREATE TABLE IF NOT EXISTS tool_records (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run_id TEXT NOT NULL,
        call_id TEXT NOT NULL, name TEXT NOT NULL, arguments TEXT NOT NULL,
        content TEXT NOT NULL, is_error BOOLEAN NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, UNIQUE (run_id, call_id))""",
    """CREATE TABLE IF NOT EXISTS proofs (
        run_id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS superseded_proofs (
        run_id TEXT NOT NULL, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        superseded_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS superseded_proofs_by_run ON superseded_proofs (run_id)",
    """CREATE TABLE IF NOT EXISTS workflow_checkpoints (
        seq BIGINT GENERATED ALWAYS AS IDENTITY, run_id TEXT NOT NULL, step_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '', status TEXT NOT NULL, evidence TEXT, identity TEXT,
        updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (run_id, step_id))""",
    """CREATE TABLE IF NOT EXISTS plugin_state (
        key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    # A row is kept once its key was ever asked for: a release empties the owner columns
    # (owner_id NULL) and keeps the token, so a token is never granted twice.
    """CREATE TABLE IF NOT EXISTS leases (
        key TEXT PRIMARY KEY, token BIGINT NOT NULL, owner_id TEXT, pid INTEGER, host TEXT,
        boot TEXT, holder TEXT NOT NULL DEFAULT '', acquired_at DOUBLE PRECISION,
        renewed_at DOUBLE PRECISION, expires_at DOUBLE PRECISION)""",
    # The queue of a lease: arrival order is the ticket; a waiter keeps its place while it
    # asks again before expires_at.
    """CREATE TABLE IF NOT EXISTS lease_waiters (
        ticket BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key TEXT NOT NULL,
        owner_id TEXT NOT NULL, holder TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL,
        UNIQUE (key, owner_id, holder))""",
    "CREATE INDEX IF NOT EXISTS lease_waiters_in_order ON lease_waiters (key, ticket)",
    """CREATE TABLE IF NOT EXISTS cancel_requests (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, reason TEXT NOT NULL, run_id TEXT,
        lease_key TEXT, created_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS cancel_requests_by_age ON cancel_requests (created_at)",
    """CREATE TABLE IF NOT EXISTS counters (
        key TEXT PRIMARY KEY, total DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS counters_by_age ON counters (updated_at)",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "history, runs, tool records, proofs, checkpoints, state, leases and their queues,"
        " cancellation requests, counters",
        _V1,
    ),
    Migration(
        2,
        "each run's stream events, announced with NOTIFY",
        (
            """CREATE TABLE IF NOT EXISTS run_events (
                run_id TEXT NOT NULL, id BIGINT NOT NULL, name TEXT NOT NULL,
                data TEXT NOT NULL, principal TEXT, created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (run_id, id))""",
            "CREATE INDEX IF NOT EXISTS run_events_by_age ON run_events (created_at)",
        ),
    ),
    Migration(
        3,
        "approval requests of tool calls and their decisions",
        (
            """CREATE TABLE IF NOT EXISTS tool_approvals (
                seq BIGINT GENERATED ALWAYS AS IDENTITY, run_id TEXT NOT NULL,
                call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
                agent_id TEXT NOT NULL, session_id TEXT NOT NULL, principal TEXT, user_id TEXT,
                request TEXT NOT NULL, reasons TEXT NOT NULL,
                requested_at DOUBLE PRECISION NOT NULL, approved BOOLEAN, approver TEXT,
                decided_by TEXT, note TEXT, decided_at DOUBLE PRECISION,
                PRIMARY KEY (run_id, call_id))""",
            "CREATE INDEX IF NOT EXISTS tool_approvals_in_order ON tool_approvals (seq)",
        ),
    ),
    Migration(
        4,
        "reply metadata kept once per attempt (attempt_endings), joined on read",
        (
            # The ending of an attempt that is no longer its run's last (the last one's is
            # runs.metadata), and of attempt 1 of a run finished without a record. Entries
            # written before keep their own copy: it is what the join would give, so nothing
            # is rewritten and every read answers as before.
            """CREATE TABLE IF NOT EXISTS attempt_endings (
                run_id TEXT NOT NULL, attempt INTEGER NOT NULL, metadata TEXT NOT NULL,
                PRIMARY KEY (run_id, attempt))""",
            # Served only finish_run's rewrite and start_run's look for a crashed attempt's
            # entries, neither of which reads the history any more: one index fewer per turn.
            "DROP INDEX IF EXISTS history_by_attempt",
        ),
    ),
    Migration(
        5,
        "run events fenced by their attempt's lease: the token each run's attempt was started"
        " under, and each stored event written under",
        (
            # NULL: not fenced, or written before 5. A batch of events under a smaller token
            # than these is of an attempt that a later one replaced: refused.
            "ALTER TABLE runs ADD COLUMN IF NOT EXISTS lease_token BIGINT",
            "ALTER TABLE run_events ADD COLUMN IF NOT EXISTS lease_token BIGINT",
        ),
    ),
    Migration(
        6,
        "retention: the run a plugin state belongs to, the high-water mark of pruned lease"
        " tokens, old rows found by age",
        (
            "ALTER TABLE plugin_state ADD COLUMN IF NOT EXISTS run_id TEXT",
            # The portal kept each run's limits under this key before state named its run.
            "UPDATE plugin_state SET run_id = substr(key, 19)"
            " WHERE left(key, 18) = 'portal.run_limits:' AND run_id IS NULL",
            "CREATE INDEX IF NOT EXISTS plugin_state_by_run ON plugin_state (run_id)"
            " WHERE run_id IS NOT NULL",
            # The greatest token of any pruned lease row (one row; none until one is pruned):
            # a key granted again starts above it, so no token of a key is granted twice.
            """CREATE TABLE IF NOT EXISTS lease_high_water (
                id BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (id), token BIGINT NOT NULL)""",
            # Not the history, written every turn: its old rows are found by id.
            "CREATE INDEX IF NOT EXISTS runs_by_finish ON runs (finished_at)",
            "CREATE INDEX IF NOT EXISTS proofs_by_age ON proofs (created_at)",
            "CREATE INDEX IF NOT EXISTS superseded_proofs_by_age"
            " ON superseded_proofs (superseded_at)",
        ),
    ),
    Migration(
        7,
        "the result a person gave for a call cut by a crash that happened (decision 0081)",
        # NULL: no result given (every decision made before 7).
        ("ALTER TABLE tool_approvals ADD COLUMN IF NOT EXISTS result TEXT",),
    ),
    Migration(
        8,
        "a row of run events holds several: the last one's id (docs/performance/0085)",
        # NULL: a row of one event, written before 8, read as it is.
        ("ALTER TABLE run_events ADD COLUMN IF NOT EXISTS last_id BIGINT",),
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1].version

Connection = psycopg.Connection[tuple[Any, ...]]


def schema_version(conn: Connection) -> int:
    """The version of the schema in the database (0: no Soulacy tables yet); reads only."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (SCHEMA_TABLE,)).fetchone()
    if row is None or not row[0]:
        return 0
    found = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {SCHEMA_TABLE}").fetchone()
    return int(found[0]) if found else 0


class NewerSchema(Exception):
    """The database is at a schema newer than this release's: nothing was changed."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"the database's Soulacy schema is version {found}, written by a newer Soulacy"
            f" (this one knows up to {SCHEMA_VERSION}); nothing was changed: use that release"
            " or a newer one"
        )
        self.found = found


def refuse_newer(found: int) -> None:
    """A database of a newer schema is neither written nor read by this code."""
    if found > SCHEMA_VERSION:
        raise NewerSchema(found)


def migrate(conn: Connection) -> int:
    """Bring the database to :data:`SCHEMA_VERSION` in one transaction, under the migration
    lock; returns the version it found. ``conn`` must be in autocommit mode (no transaction
    open). A newer schema raises :class:`NewerSchema`, and the transaction changes nothing."""
    with conn.transaction():
        # First the lock, then even the schema table: two processes creating it at once would
        # collide in the catalogue.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE} (version INTEGER PRIMARY KEY,"
            " description TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
        )
        found = schema_version(conn)
        refuse_newer(found)
        for migration in MIGRATIONS:
            if migration.version <= found:
                continue
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                f"INSERT INTO {SCHEMA_TABLE} (version, description, applied_at)"
                " VALUES (%s, %s, extract(epoch FROM clock_timestamp())::float8)",
                (migration.version, migration.description),
            )
    return found
