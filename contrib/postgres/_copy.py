"""``soulacy store copy``: a SQLite workspace file's data, copied into a PostgreSQL database.

The SQLite file is read by its documented format (docs/storage.md, "Schema", version 14), with
the ``sqlite3`` module; the SQLite store plugin is not imported (plugins never import each
other). A file of an older version is refused: the SQLite store migrates it in place the first
time it opens it for writing, and that migration is the SQLite plugin's to run.

Both sides are read and written in one transaction each: the source in one SQLite read
transaction (a consistent snapshot, even while a process writes to it), the target in one
PostgreSQL transaction that first locks every Soulacy table (``EXCLUSIVE``: readers go on,
writers wait), then checks that the target holds nothing, then copies. Either everything is
copied, or nothing is.

What is copied, row for row and value for value: history (with its ids, so the order of every
conversation is kept, and the identity sequence set past the file's last id), runs with their
attempts and the endings of their earlier attempts (both stores keep reply metadata once per
attempt and join it on read, so an entry's metadata is copied as the file keeps it), tool
records (in call order, from both places the file keeps them: a tool result's history entry,
or ``tool_records``), proofs and superseded proofs (bodies byte for byte, so each sha256
still verifies), checkpoints (in step order), plugin state (with the run each belongs to),
leases (owners and tokens, and the high-water mark of pruned ones: a token the target grants
next is greater than every token the file granted) and counters. Left out: the queues of
leases and cancellation requests (both live for seconds, for processes running now), and
what the store never reads (the original system's ``legacy_proofs`` table and
``workspace_id`` and ``subject`` columns).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from psycopg import errors as pg

from soulacy.kernel import UsageError
from soulacy.kernel.store import LeaseOwner
from soulacy.plugins.sqlkit import epoch, is_wal

from ._schema import Connection
from ._store import PostgresStore

SQLITE_VERSION = 14  # the SQLite file format this copy reads (docs/storage.md, "Schema")
LOCK_TIMEOUT = "10s"  # how long the copy waits for the target's tables before giving up

# Every Soulacy table of the target, in the order they are locked (``leases`` first: the
# store's writes under a lease start with it, so a copy waiting behind one never deadlocks).
TARGET_TABLES = (
    "leases",
    "lease_high_water",
    "lease_waiters",
    "runs",
    "attempt_endings",
    "conversation_history",
    "tool_records",
    "proofs",
    "superseded_proofs",
    "workflow_checkpoints",
    "plugin_state",
    "cancel_requests",
    "counters",
    "run_events",
    "tool_approvals",
)


class CopyRefused(UsageError):
    """The copy cannot be made as asked (exit code 2); nothing was written."""


# A run's tool records as the SQLite store reads them (docs/decisions/0047): those held in its
# tool results' history entries (an entry of the run's conversation after the run's first
# history id) and those kept apart in tool_records, each after the entry it followed (NULL:
# before every entry); of two with one call id the first. Numbered in that call order:
# PostgreSQL's ``seq`` is the order its store reads them in.
TOOL_RECORDS = (
    "SELECT row_number() OVER (ORDER BY position, apart, seq), run_id, call_id, name,"
    " arguments, content, is_error, created_at FROM (SELECT *, row_number() OVER"
    " (PARTITION BY run_id, call_id ORDER BY position, apart, seq) AS nth FROM ("
    " SELECT h.run_id, h.tool_call_id AS call_id, h.name, h.record_arguments AS arguments,"
    " COALESCE(h.record_content, h.content) AS content, h.is_error,"
    " h.record_created_at AS created_at, h.id AS position, 0 AS apart, 0 AS seq"
    " FROM conversation_history AS h JOIN runs AS r ON r.run_id = h.run_id"
    " WHERE h.record_arguments IS NOT NULL AND h.id > r.first_history_id"
    " AND h.session_id = r.session_id AND h.agent_id = r.agent_id"
    " AND h.principal IS r.principal AND h.user_id IS r.user_id"
    " UNION ALL SELECT run_id, call_id, name, arguments, content, is_error, created_at,"
    " COALESCE(after_history_id, -1), 1, seq FROM tool_records"
    ")) WHERE nth = 1 ORDER BY 1"
)


@attrs.frozen
class Table:
    """How one table is copied: the target's columns, and the query reading the source's."""

    name: str
    label: str  # for people: "history entries"
    columns: tuple[str, ...]
    query: str
    sequence: str | None = None  # the identity column set past the file's last value


TABLES: tuple[Table, ...] = (
    Table(
        "runs",
        "runs",
        (
            "run_id",
            "agent_id",
            "session_id",
            "user_id",
            "principal",
            "status",
            "verification",
            "incomplete_reason",
            "metadata",
            "started_at",
            "finished_at",
            "attempt",
            "lease_key",
            "lease_token",
        ),
        "SELECT run_id, agent_id, session_id, user_id, principal, status, verification,"
        " incomplete_reason, metadata, started_at, finished_at, attempt, lease_key, lease_token"
        " FROM runs ORDER BY started_at, run_id",
    ),
    Table(
        "conversation_history",
        "history entries",
        (
            "id",
            "agent_id",
            "session_id",
            "run_id",
            "role",
            "content",
            "tokens",
            "created_at",
            "metadata",
            "tool_call_id",
            "tool_calls",
            "name",
            "is_error",
            "principal",
            "user_id",
            "attempt",
        ),
        # An entry's own reply metadata only: its attempt's is the run's or its attempt's
        # ending, copied with them and joined on read by both stores (docs/decisions/0045).
        "SELECT id, agent_id, session_id, run_id, role, content, tokens, created_at, metadata,"
        " tool_call_id, tool_calls, name, is_error, principal, user_id, attempt"
        " FROM conversation_history ORDER BY id",
        sequence="id",
    ),
    Table(
        "tool_records",
        "tool records",
        ("seq", "run_id", "call_id", "name", "arguments", "content", "is_error", "created_at"),
        TOOL_RECORDS,
        sequence="seq",
    ),
    Table(
        "attempt_endings",
        "attempt endings",
        ("run_id", "attempt", "metadata"),
        # Those the file reads: the SQLite store reads a run's current attempt's metadata from
        # the run alone; the PostgreSQL store would read such an ending after a NULL there.
        "SELECT e.run_id, e.attempt, e.metadata FROM attempt_endings AS e"
        " WHERE NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = e.run_id"
        " AND r.attempt = e.attempt) ORDER BY e.run_id, e.attempt",
    ),
    Table(
        "proofs",
        "proofs",
        ("run_id", "sha256", "body", "receipts", "created_at"),
        "SELECT run_id, sha256, body, receipts, created_at FROM proofs ORDER BY run_id",
    ),
    Table(
        "superseded_proofs",
        "superseded proofs",
        ("run_id", "sha256", "body", "receipts", "created_at", "superseded_at"),
        "SELECT run_id, sha256, body, receipts, created_at, superseded_at"
        " FROM superseded_proofs ORDER BY rowid",
    ),
    Table(
        "workflow_checkpoints",
        "checkpoints",
        ("seq", "run_id", "step_id", "agent_id", "status", "evidence", "identity", "updated_at"),
        # The rowid is the step order (the SQLite store reads checkpoints by it); a row
        # without a run or step (possible in the original system's file) is never read.
        "SELECT rowid, run_id, step_id, agent_id, status, evidence, state, identity, updated_at"
        " FROM workflow_checkpoints WHERE run_id IS NOT NULL AND step_id IS NOT NULL"
        " ORDER BY rowid",
        sequence="seq",
    ),
    Table(
        "plugin_state",
        "plugin state",
        ("key", "value", "updated_at", "run_id"),
        "SELECT key, value, updated_at, run_id FROM plugin_state ORDER BY key",
    ),
    Table(
        "leases",
        "leases",
        (
            "key",
            "token",
            "owner_id",
            "pid",
            "host",
            "boot",
            "holder",
            "acquired_at",
            "renewed_at",
            "expires_at",
        ),
        "SELECT key, token, owner_id, pid, host, boot, holder, acquired_at, renewed_at,"
        " expires_at FROM leases ORDER BY key",
    ),
    Table(
        "lease_high_water",
        "pruned lease tokens",
        ("id", "token"),
        "SELECT id, token FROM lease_high_water",
    ),
    Table(
        "counters",
        "counters",
        ("key", "total", "updated_at"),
        "SELECT key, total, updated_at FROM counters ORDER BY key",
    ),
)

# Approval requests, pending ones included: a run interrupted while it waited is resumed by a
# decision made on the new store (docs/approvals.md).
TABLES = (
    *TABLES,
    Table(
        "tool_approvals",
        "approval requests",
        (
            "seq",
            "run_id",
            "call_id",
            "tool",
            "arguments",
            "agent_id",
            "session_id",
            "principal",
            "user_id",
            "request",
            "reasons",
            "requested_at",
            "approved",
            "approver",
            "decided_by",
            "note",
            "decided_at",
            "result",
        ),
        "SELECT rowid, run_id, call_id, tool, arguments, agent_id, session_id, principal,"
        " user_id, request, reasons, requested_at, approved, approver, decided_by, note,"
        " decided_at, result FROM tool_approvals ORDER BY rowid",
        sequence="seq",
    ),
)

# In the file, not copied, and why (for the report).
LEFT_OUT = {
    "lease_waiters": "kept only while the processes waiting for a lease ask again",
    "cancel_requests": "asked of processes running on the SQLite file",
    "run_events": "streams' events, kept a day for clients that reconnect to a running server",
    "legacy_proofs": "the original system's, never read by the store",
}


@attrs.frozen
class CopyReport:
    source: str
    target: str
    schema_version: int  # the SQLite file's
    target_migrated_from: int  # the PostgreSQL schema version found before the copy
    copied: dict[str, int]  # table -> rows
    left_out: dict[str, int]  # table -> rows in the file, not copied
    highest_token: int  # the greatest lease token copied
    running: tuple[str, ...]  # runs alive in the source when copied (their process still ran)
    unverified_proofs: tuple[str, ...]  # run ids whose stored sha256 does not match the body

    def data(self) -> dict[str, Any]:
        return attrs.asdict(self)


# -- reading the file ------------------------------------------------------------------------


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """Open without creating or changing any file: a WAL file without its ``-wal`` is
    complete in itself (``immutable``); with it (a process may be writing) ``mode=ro`` reads
    the commits still in the WAL too."""
    query = "mode=ro"
    if is_wal(path) and not Path(f"{path}-wal").exists():
        query += "&immutable=1"
    return sqlite3.connect(
        f"{path.resolve().as_uri()}?{query}", uri=True, isolation_level=None, timeout=30
    )


def open_source(path: Path) -> sqlite3.Connection:
    """The file, opened read-only (nothing is created or changed); its version checked."""
    if not path.is_file():
        raise CopyRefused(f"no SQLite store at {path} (pass --from PATH, or -w WORKSPACE)")
    try:
        conn = _connect_read_only(path)
    except sqlite3.Error as exc:
        raise CopyRefused(f"{path}: cannot open it as a SQLite database ({exc})") from exc
    conn.text_factory = _decode  # text that is not UTF-8 is copied with U+FFFD, not refused
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:
        conn.close()
        raise CopyRefused(f"{path}: not a SQLite database Soulacy can read ({exc})") from exc
    if version != SQLITE_VERSION or "runs" not in tables:
        conn.close()
        if not tables & {"conversation_history", "runs"} or version == SQLITE_VERSION:
            raise CopyRefused(f"{path} is not a Soulacy store: it has no table of one")
        if version > SQLITE_VERSION:
            raise CopyRefused(
                f"{path} is of schema version {version}, written by a newer Soulacy: this"
                f" release copies version {SQLITE_VERSION}; copy it with that release"
            )
        raise CopyRefused(
            f"{path} is of schema version {version}; the copy reads version"
            f" {SQLITE_VERSION} only. Open the workspace once with the SQLite store, which"
            " migrates the file in place: any command that writes to the store does, while"
            " the SQLite store is the workspace's (before the PostgreSQL store is enabled in"
            " config.yaml), such as `soulacy runs cancel none` (it migrates the file, then"
            " answers that no run 'none' is running); then copy again"
        )
    return conn


def _maybe_epoch(value: Any) -> float | None:
    return None if value is None else epoch(value)


def _text(value: Any) -> str | None:
    """Text as PostgreSQL keeps it: NUL characters as U+FFFD (as the store writes them)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _str(value: Any) -> str:
    return _text(value) or ""


def _int(value: Any, default: int | None = None) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _evidence(evidence: Any, legacy_state: Any) -> str | None:
    """A checkpoint's evidence as the SQLite store reads it: the original system kept a
    step's result in ``state``, read as ``{"result": …}``."""
    if evidence is not None:
        return _text(evidence)
    if legacy_state is None:
        return None
    try:
        result = json.loads(legacy_state)
    except ValueError:
        result = legacy_state
    return json.dumps({"result": result}, default=str)


def _maybe_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _same(value: Any) -> Any:
    return value


def _int_or(default: int) -> Callable[[Any], int | None]:
    return lambda value: _int(value, default)


# How each column of a source row (``Table.query``) is read, the way the SQLite store reads it,
# into the target's row (``Table.columns``), by table.
_S, _T, _E, _ME = _str, _text, epoch, _maybe_epoch
_COLUMNS: dict[str, tuple[Callable[[Any], Any], ...]] = {
    "runs": (_S, _S, _S, _T, _T, _S, _T, _T, _T, _E, _ME, _int_or(1), _T, _int),
    "conversation_history": (
        *(int, _S, _S, _T, _S, _S, _int, _E, _T, _T, _T, _T, bool, _T, _T),
        _int_or(1),
    ),
    "attempt_endings": (_S, _int_or(1), _S),
    "tool_records": (int, _S, _S, _S, _S, _S, bool, _E),
    "proofs": (_S, _S, _S, _int_or(0), _E),
    "superseded_proofs": (_S, _S, _S, _int_or(0), _E, _E),
    # evidence: read with the legacy state beside it (``_convert``)
    "workflow_checkpoints": (int, _S, _S, _S, _S, _same, _T, _E),
    "plugin_state": (_S, _S, _E, _T),
    "lease_high_water": (lambda _: True, _int_or(0)),
    "leases": (_S, _int_or(0), _T, _int, _T, _T, _S, _ME, _ME, _ME),
    "counters": (_S, lambda v: float(v or 0.0), _E),
    "tool_approvals": (
        *(int, _S, _S, _S, _S, _S, _S, _T, _T, _S, _S, _E),
        *(_maybe_bool, _T, _T, _T, _ME, _T),
    ),
}


def _convert(table: str, r: Sequence[Any]) -> tuple[Any, ...]:
    """One source row as the target's row (``Table.columns``), read the way the SQLite store
    reads it."""
    if table == "workflow_checkpoints":  # evidence and the original system's state: one column
        r = (*r[:5], _evidence(r[5], r[6]), *r[7:])
    return tuple(read(value) for read, value in zip(_COLUMNS[table], r, strict=True))


def _rows(source: sqlite3.Connection, table: Table) -> Iterator[tuple[Any, ...]]:
    for row in source.execute(table.query):
        yield _convert(table.name, row)


def _sqlite_sequence(source: sqlite3.Connection, table: str) -> int:
    """The last id AUTOINCREMENT handed out (ids of deleted rows are never handed out again)."""
    try:
        row = source.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
    except sqlite3.Error:  # no AUTOINCREMENT table was ever written to
        return 0
    if row is None:
        return 0
    return _int(row[0], 0) or 0


def _alive_runs(source: sqlite3.Connection) -> tuple[str, ...]:
    """Runs whose lease says they were running when copied (what they write later is not)."""
    rows = source.execute(
        "SELECT r.run_id, l.owner_id, l.pid, l.host, l.boot, l.expires_at FROM runs AS r"
        " JOIN leases AS l ON l.key = r.lease_key WHERE r.status = 'running'"
        " AND l.holder = r.run_id AND l.owner_id IS NOT NULL"
    ).fetchall()
    now = time.time()
    alive = []
    for run_id, owner_id, pid, host, boot, expires_at in rows:
        owner = LeaseOwner(str(owner_id), int(pid or 0), str(host or ""), str(boot or ""))
        if float(expires_at or 0.0) > now and not owner.provably_gone():
            alive.append(str(run_id))
    return tuple(alive)


# -- writing the target ----------------------------------------------------------------------


def _copy(conn: Connection, source_path: Path, target: str, migrated_from: int) -> CopyReport:
    """Inside the target's transaction (``PostgresStore._write``): lock, check, copy."""
    conn.execute("SET LOCAL statement_timeout = 0")  # a large file takes as long as it takes
    conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    try:
        conn.execute(f"LOCK TABLE {', '.join(TARGET_TABLES)} IN EXCLUSIVE MODE")
    except pg.LockNotAvailable as exc:
        raise CopyRefused(
            f"{target} is in use: its tables stayed locked for {LOCK_TIMEOUT} by other"
            " sessions (Soulacy processes?); copy into a database no process uses yet"
        ) from exc
    found = {
        table: int(n)
        for table, n in zip(
            TARGET_TABLES,
            conn.execute(
                "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {table})" for table in TARGET_TABLES)
            ).fetchone()
            or (),
            strict=True,
        )
        if n
    }
    if found:
        held = ", ".join(f"{table} {n}" for table, n in found.items())
        raise CopyRefused(
            f"{target} is not empty (rows: {held}): the copy goes only into a database that"
            " holds no Soulacy data yet, because it keeps the file's history ids, run ids and"
            " lease tokens as they are: merged into another store's, they would collide with"
            " its own or interleave with its conversations. Nothing was copied: copy into a new"
            " database"
        )

    source = open_source(source_path)
    try:
        source.execute("BEGIN")  # one read transaction: one consistent snapshot of the file
        copied: dict[str, int] = {}
        unverified: list[str] = []
        highest_token = 0
        with conn.cursor() as cursor:
            for table in TABLES:
                count = 0
                statement = f"COPY {table.name} ({', '.join(table.columns)}) FROM STDIN"
                with cursor.copy(statement) as copy:
                    for row in _rows(source, table):
                        if table.name in ("proofs", "superseded_proofs"):
                            if hashlib.sha256(row[2].encode()).hexdigest() != row[1]:
                                unverified.append(f"{table.name}:{row[0]}")
                        elif table.name in ("leases", "lease_high_water"):
                            highest_token = max(highest_token, int(row[1]))
                        copy.write_row(row)
                        count += 1
                copied[table.name] = count
                if table.sequence is not None:
                    last = _sqlite_sequence(source, table.name)
                    top = conn.execute(
                        f"SELECT COALESCE(MAX({table.sequence}), 0) FROM {table.name}"
                    ).fetchone()
                    last = max(last, int(top[0]) if top else 0)
                    if last > 0:
                        conn.execute(
                            "SELECT setval(pg_get_serial_sequence(%s, %s), %s, true)",
                            (table.name, table.sequence, last),
                        )
        present = {
            r[0] for r in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        left_out = {
            name: int(source.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0])
            for name in LEFT_OUT
            if name in present
        }
        alive = _alive_runs(source)
        source.execute("COMMIT")
    finally:
        source.close()
    # What the target holds now is what was read: no row lost or doubled on the way.
    for name, count in copied.items():
        stored = conn.execute(f"SELECT COUNT(*) FROM {name}").fetchone()
        if stored is None or int(stored[0]) != count:
            raise AssertionError(f"{name}: copied {count} rows, the target holds {stored}")
    return CopyReport(
        str(source_path),
        target,
        SQLITE_VERSION,
        migrated_from,
        copied,
        left_out,
        highest_token,
        alive,
        tuple(unverified),
    )


async def copy_sqlite(store: PostgresStore, source: Path) -> CopyReport:
    """Copy the SQLite file ``source`` into ``store``'s database (migrated first), in one
    transaction; :class:`CopyRefused` (nothing written) for a file of another version or a
    target that is not empty."""
    # Refused before the target is touched (in a worker thread: it reads the file).
    await trio.to_thread.run_sync(lambda: open_source(source).close())
    migrated_from = await store.open()
    target = store.describe()
    return await store._write("copy", lambda conn: _copy(conn, source, target, migrated_from))
