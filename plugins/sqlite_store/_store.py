"""The SQLite store: one file per workspace, WAL.

One connection per store, used by one caller at a time, so calls of one process queue instead
of colliding. With ``synchronous=NORMAL`` (no fsync per commit) every call runs on the Trio
thread with a busy timeout of 0, and only one that SQLite answers busy (another process's
writer) runs again in a worker thread that waits; with ``FULL`` every call runs in a worker
thread (decisions 0009 and 0044). Writers open ``BEGIN IMMEDIATE``: the writer
lock is reserved before anything is read, so a proof finalized by another process is never
promoted from a stale snapshot, and a busy database makes writers wait (``busy_timeout``)
instead of failing. A write made under a lease (``fence=``) reads the lease's token inside that
same transaction, so no takeover can come between the check and the write; every lease
expiry is judged by ``time.time()`` inside the transaction (the clock of the host).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import trio

from soulacy.kernel import json_encoder
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    Ending,
    HistoryEntry,
    Lease,
    LeaseLost,
    ProofRecord,
    Pruned,
    RunRecord,
    StateRow,
    StorageError,
    ToolRecord,
)
from soulacy.plugins.sqlkit import (
    HISTORY,
    LEASE,
    SQLITE,
    SQLITE_CLOCK,
    TOOL_RECORD,
    Schema,
    SQLStore,
    dumps,
    high_water,
    is_wal,
    state_upsert,
)

from ._schema import ENTRY_METADATA, SCHEMA_VERSION, migrate, refuse_newer

if TYPE_CHECKING:
    from soulacy.kernel.store import Store

T = TypeVar("T")
R = TypeVar("R")
CHECKPOINT_EVERY = 256  # inline commits between two checkpoints (run in a worker thread)
# The WAL's bound (docs/storage.md, Durability): past WAL_CHECKPOINT_BYTES a commit
# starts a truncating checkpoint aside; past WAL_WAIT_BYTES the writer waits for one itself,
# so the file stays under WAL_BOUND whatever the scheduling, while no transaction writes more
# than WAL_BOUND - WAL_WAIT_BYTES.
WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024
WAL_WAIT_BYTES = 32 * 1024 * 1024
WAL_BOUND = 64 * 1024 * 1024
HOMES_KEPT = 4096  # runs whose home (decision 0047) a store remembers
# History rows of one fenced INSERT: 16 values each, under the 999 bound parameters of any
# SQLite build. A turn of more rows is written in a transaction of several.
FENCED_ROWS = 62
INLINE_ROWS = 256  # rows of a long read made on the Trio thread (about 1 ms); the rest in a thread
RUN_EVENTS_POLL = 0.25  # seconds between two looks for events another process appended


# What the OS or SQLite said, in words a person acts on.
_DISK_FULL = "disk full"
_READ_ONLY = "read-only"


def _plain_cause(exc: BaseException, path: Path) -> str | None:
    """Say "disk full" or "read-only" when the OS says so (through SQLite or an OSError)."""
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return _DISK_FULL
        if exc.errno == errno.EROFS:
            return f"{_READ_ONLY} file system"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return f"{_READ_ONLY}: permission denied"
        return None
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL:
        return _DISK_FULL
    if primary == sqlite3.SQLITE_READONLY:
        return f"{_READ_ONLY} database"
    if primary in (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN):
        # SQLite reports a full disk met while sizing its shared memory (at open) as a plain
        # I/O error; ask the OS how much room is left.
        if _free_bytes(path) == 0:
            return _DISK_FULL
        if primary == sqlite3.SQLITE_CANTOPEN and not os.access(_existing(path), os.W_OK):
            return f"{_READ_ONLY}: the folder cannot be written"
    return None


def _existing(path: Path) -> Path:
    """``path``, or its nearest existing parent folder."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path if path.is_dir() else path.parent


def _free_bytes(path: Path) -> int | None:
    try:
        stat = os.statvfs(_existing(path))
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite's answer when another connection holds a lock: worth waiting for, in a thread."""
    return "locked" in str(exc) or "busy" in str(exc)


def _checkpoint(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _clock() -> float:
    return time.time()  # looked up at each call: a test may stand in for the clock


class SQLiteStore(SQLStore[sqlite3.Connection]):
    """Every role of the store in one SQLite file: history, runs, tool records, proofs,
    checkpoints, plugin state, leases (with their queues), cancel requests and counters.
    The statements it shares with the PostgreSQL store are ``SQLStore``'s (``sqlkit``)."""

    multi_process: ClassVar[bool] = True  # processes on one host share the file
    dialect = SQLITE
    retention = Schema(
        SQLITE, keeps_newest=True, first_history_id="COALESCE(r.first_history_id, -1)"
    )
    # Every entry the run writes from now has a greater id: set by the first attempt started
    # with schema 10 (those before kept every record apart).
    first_history_id = "(SELECT COALESCE(max(id), 0) FROM conversation_history)"
    legacy_state = "state"

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
        read_only: bool = False,
    ) -> None:
        self.path = path
        self._wal_path = f"{path}-wal"
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous
        # Read-only: nothing is created, migrated or written; see _open_read_only.
        self.read_only = read_only
        self._snapshot: tempfile.TemporaryDirectory[str] | None = None
        self._conn: sqlite3.Connection | None = None
        # One user of the connection at a time, on any thread. A semaphore: a third of the
        # cost of a trio.Lock per call, and every call releases it in a finally.
        self._lock = trio.Semaphore(1, max_value=1)
        # With synchronous=NORMAL a WAL commit does not fsync, so an uncontended write is
        # cheaper on the Trio thread than the hop to a worker; see docs/decisions/0009.
        self._inline = synchronous == "NORMAL" and not read_only
        self._commits = 0
        self._checkpointing = False
        # A WAL larger than these gets a truncating checkpoint: aside, or waited for by the
        # writer; raised while a reader of another process holds the log (_truncated).
        self._truncate_above = WAL_CHECKPOINT_BYTES
        self._wait_above = WAL_WAIT_BYTES
        self._checkpointer: sqlite3.Connection | None = None  # checkpoints, apart from writes
        self._checkpoint_limiter = trio.CapacityLimiter(1)
        # Starts background work in the kernel's nursery (``Kernel.start_soon``, set by the
        # plugin); False when there is none (the kernel is not open).
        self.start_soon: Callable[..., bool] = _nowhere
        self.migrated_from: int | None = None
        self._appended = trio.Event()  # set, and replaced, by this process's appends
        # Runs whose records this process has seen held in their history rows: (run id,
        # agent, session, principal, user) of a runs row with a first_history_id. Once true it
        # stays true while the run is not finished (only retention deletes a runs row, of a
        # finished run, and a retry's start_run writes it again; its owner is never rewritten,
        # first_history_id is set once), so a turn of such a run skips reading its row
        # (decision 0047).
        self._homes: dict[tuple[str, str, str, str | None, str | None], None] = {}

    # -- plumbing ------------------------------------------------------------------------------

    def describe(self) -> str:
        """Where the data is, for messages naming the store."""
        return str(self.path)

    def _error(self, what: str, exc: BaseException) -> StorageError:
        detail = f"{type(exc).__name__}: {exc}" if isinstance(exc, sqlite3.Error) else str(exc)
        cause = _plain_cause(exc, self.path)
        if cause:
            detail = f"{cause} ({detail})"
        return StorageError(f"SQLite store {self.path}: {what} failed: {detail}")

    async def _run(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` on the connection, one caller at a time. Inline on the Trio thread while
        writes run inline (busy_timeout is 0 there: SQLite never waits), else, and when SQLite
        answers busy, in a worker thread that waits up to busy_timeout."""
        try:
            self._lock.acquire_nowait()  # the uncontended path does not yield (the engine does)
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            conn = self._conn
            if conn is not None and self._inline:
                try:
                    return fn(conn)
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise self._error(what, exc) from exc
                except (sqlite3.Error, OSError) as exc:
                    raise self._error(what, exc) from exc
            return await self._in_thread(what, fn)
        finally:
            self._lock.release()

    async def _read(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A read. A WAL read waits for no writer, so it runs inline like a write: no hop to
        a worker thread for each of a run's reads (docs/decisions/0044)."""
        return await self._run(what, fn)

    async def _in_thread(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        def work() -> T:
            conn = self._connection()
            if not self._inline:
                return fn(conn)
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            try:
                return fn(conn)
            finally:
                conn.execute("PRAGMA busy_timeout = 0")

        try:
            return await trio.to_thread.run_sync(work)
        except (sqlite3.Error, OSError) as exc:
            raise self._error(what, exc) from exc

    async def _write(self, what: str, body: Callable[[sqlite3.Connection], T]) -> T:
        """One write transaction: inline when uncontended, else in a thread that waits."""
        result = await self._run(what, lambda conn: self._transaction(conn, body))
        await self._count_commit()
        return result

    async def _statement(self, what: str, sql: str, args: Sequence[Any]) -> int:
        """One writing statement, its own transaction (no BEGIN IMMEDIATE: SQLite takes the
        write lock at the start of a writing statement, before it reads anything)."""
        count = await self._run(what, lambda conn: conn.execute(sql, args).rowcount)
        await self._count_commit()
        return count

    async def _count_commit(self) -> None:
        """Autocheckpointing is off when writes run inline: checkpoint every N commits, on a
        connection of its own in a worker thread, while writers go on (WAL allows it) — in
        the kernel's nursery while it is open (``start_soon``), else in the writer's task.
        In either mode a WAL grown past its bound is truncated (``WAL_*_BYTES``)."""
        self._commits += 1
        wal = self._wal_bytes()  # a stat: about a microsecond beside a commit's tens
        if wal > self._wait_above:
            # The writer waits for the checkpoint: the bound holds.
            self._truncated(await self._checkpoint("TRUNCATE"), wal)
            return
        if self._checkpointing:
            return
        mode = "TRUNCATE" if wal > self._truncate_above else "PASSIVE"
        if mode == "TRUNCATE" or (self._inline and self._commits % CHECKPOINT_EVERY == 0):
            self._checkpointing = True
            if not self.start_soon(self._checkpoint_aside, mode, wal, name="sqlite checkpoint"):
                await self._checkpoint_aside(mode, wal)

    def _truncated(self, emptied: bool, wal: int) -> None:
        """After a truncating checkpoint of a WAL of ``wal`` bytes: not emptied, a reader of
        another process holds the log (past busy_timeout), so the next ones wait until it grew
        by another step rather than at every commit."""
        step = 0 if emptied else wal
        self._truncate_above = step + WAL_CHECKPOINT_BYTES
        self._wait_above = max(step + WAL_CHECKPOINT_BYTES, WAL_WAIT_BYTES)

    def _wal_bytes(self) -> int:
        try:
            return os.stat(self._wal_path).st_size
        except OSError:
            return 0

    async def _checkpoint_aside(self, mode: str = "PASSIVE", wal: int = 0) -> None:
        try:
            emptied = await self._checkpoint(mode)
            if mode == "TRUNCATE":
                self._truncated(emptied, wal)
        finally:
            self._checkpointing = False

    async def _checkpoint(self, mode: str) -> bool:
        """A checkpoint on a connection of its own, one at a time; whether it copied every
        frame. ``TRUNCATE`` waits (up to the busy timeout) for writers and readers, copies
        every frame and empties the WAL."""

        def work() -> bool:
            if self._checkpointer is None:
                self._checkpointer = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout,
                    check_same_thread=False,
                    isolation_level=None,
                )
            busy = self._checkpointer.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            return busy is not None and busy[0] == 0

        # A checkpoint that cannot run now runs at the next one, or at close.
        with contextlib.suppress(sqlite3.Error):
            return await trio.to_thread.run_sync(work, limiter=self._checkpoint_limiter)
        return False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            # Two processes opening a new file at once: switching it to WAL happens in rollback
            # mode, where SQLite answers "locked" at once (deadlock avoidance) instead of
            # waiting. Such an answer is retried until the busy timeout is used up.
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    self._conn = self._open()
                    # SQLITE.now: the host's clock, read inside the transaction
                    self._conn.create_function(SQLITE_CLOCK, 0, _clock)
                    break
                except sqlite3.OperationalError as exc:
                    locked = _busy(exc)
                    if not locked or time.monotonic() >= deadline:
                        raise
                    time.sleep(0.05)  # in a worker thread: this never blocks the Trio loop
        return self._conn

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            return self._open_read_only()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"could not enable WAL (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            # A WAL a checkpoint has emptied is cut back to this when it is next reused.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_CHECKPOINT_BYTES}")
            self.migrated_from = migrate(conn)
            if self._inline:
                # Checkpoints (the only fsyncs) run in a worker thread, never inline.
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                conn.execute("PRAGMA busy_timeout = 0")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        """Open for reading without creating or changing any file, even in a folder that
        cannot be written.

        A WAL database needs its ``-shm`` file to be read; SQLite creates it (and an empty
        ``-wal``) when missing, and cannot in a read-only folder. So: no file is an empty
        store (in memory); a rollback-journal file opens ``mode=ro``; a WAL file with both its
        ``-wal`` and ``-shm`` opens ``mode=ro`` on them (a writer may be running); a WAL file
        without ``-wal`` is complete in itself and opens ``immutable=1`` (WAL writers change
        the main file only when they checkpoint); a ``-wal`` without ``-shm`` (a copy taken
        while the database was open) is read from a private copy of both. A file of an older
        schema is migrated in memory, never on disk.
        """
        wal, shm = Path(f"{self.path}-wal"), Path(f"{self.path}-shm")
        if not self.path.exists():
            conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            migrate(conn)
        else:
            source = self.path
            if is_wal(self.path) and wal.exists() and not shm.exists():
                self._snapshot = tempfile.TemporaryDirectory(prefix="soulacy-ro-")
                source = Path(self._snapshot.name) / self.path.name
                shutil.copyfile(self.path, source)
                shutil.copyfile(wal, f"{source}-wal")
            query = "mode=ro"
            if is_wal(source) and not Path(f"{source}-wal").exists():
                query += "&immutable=1"
            conn = sqlite3.connect(
                f"{source.resolve().as_uri()}?{query}",
                uri=True,
                timeout=self.busy_timeout,
                check_same_thread=False,
                isolation_level=None,
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                version = int(conn.execute("PRAGMA user_version").fetchone()[0])
                refuse_newer(version)
                if version < SCHEMA_VERSION:  # an older file: read it migrated, in memory
                    memory = sqlite3.connect(
                        ":memory:", check_same_thread=False, isolation_level=None
                    )
                    conn.backup(memory)
                    conn.close()
                    conn = memory
                    self.migrated_from = migrate(conn)
            except BaseException:
                conn.close()
                raise
        conn.execute("PRAGMA query_only = ON")  # a write says "read-only", even in memory
        return conn

    @staticmethod
    def _transaction(conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = body(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    async def open(self) -> int:
        """Open (creating and migrating as needed); returns the version it migrated from."""
        await self._read("open", lambda conn: None)
        return int(self.migrated_from or 0)

    async def aclose(self) -> None:
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None

                def close() -> None:
                    if self._inline:
                        _checkpoint(conn)
                    conn.close()

                await trio.to_thread.run_sync(close)
        async with self._checkpoint_limiter:  # after a checkpoint still running aside
            if self._checkpointer is not None:
                checkpointer, self._checkpointer = self._checkpointer, None
                await trio.to_thread.run_sync(checkpointer.close)

    # -- conversation store ----------------------------------------------------------------------

    async def _entries(self, what: str, where: str, args: tuple[Any, ...]) -> list[HistoryEntry]:
        # Reply metadata is kept once per attempt (the run's, or its stored ending), not on
        # every entry: joined here, so finish_run writes one row (docs/decisions/0039).
        sql = (
            f"SELECT {_ENTRY_COLUMNS} FROM conversation_history AS h"
            f" LEFT JOIN runs AS r ON r.run_id = h.run_id WHERE {where} ORDER BY h.id"
        )
        return await self._read_long(what, sql, args, HISTORY.decode)

    async def _read_long(
        self,
        what: str,
        sql: str,
        args: tuple[Any, ...],
        make: Callable[[Sequence[Any]], R],
    ) -> list[R]:
        """A read that may be long (a conversation's whole history): its first INLINE_ROWS
        rows as any read, the rest of a longer one in a worker thread, from the same statement
        (one snapshot), so that a long read does not hold the Trio thread."""

        def whole(conn: sqlite3.Connection) -> list[R]:
            return [make(r) for r in conn.execute(sql, args)]

        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()
        try:
            conn = self._conn
            if conn is None or not self._inline:
                return await self._in_thread(what, whole)
            try:
                cursor = conn.execute(sql, args)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise self._error(what, exc) from exc
                return await self._in_thread(what, whole)
            except sqlite3.Error as exc:
                raise self._error(what, exc) from exc
            try:
                head = [make(r) for r in cursor.fetchmany(INLINE_ROWS)]
            except BaseException as exc:
                cursor.close()  # ends the statement's read transaction
                if isinstance(exc, sqlite3.Error):
                    raise self._error(what, exc) from exc
                raise
            if len(head) < INLINE_ROWS:  # the statement is done
                return head

            def rest() -> list[R]:
                try:
                    return head + [make(r) for r in cursor]
                finally:
                    cursor.close()

            try:
                return await trio.to_thread.run_sync(rest)
            except (sqlite3.Error, OSError) as exc:
                raise self._error(what, exc) from exc
        finally:
            self._lock.release()

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = await super().start_run(run, fence)
        # first_history_id is set now (by this start or an earlier one): the home is known.
        self._remember_home(
            (stored.run_id, stored.agent_id, stored.session_id, stored.principal, stored.user_id)
        )
        return stored

    def _remember_home(self, owner: tuple[str, str, str, str | None, str | None]) -> None:
        if len(self._homes) >= HOMES_KEPT:
            del self._homes[next(iter(self._homes))]  # the oldest: its run is likely over
        self._homes[owner] = None

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
        ending: Ending | None = None,
    ) -> ProofRecord | None:
        # History and tool-record ids come from the rowid (schema 9): they stay above every
        # earlier one only because no such row is ever deleted (docs/storage.md, Migrations).
        # A tool record is kept in its tool result's row (schema 10, docs/decisions/0047):
        # then the commit dirties the history and its index only.
        # A state row, and a run's end (its status and proof), go in the turn's transaction,
        # after the fence was asked (the writer lock is held from then on: no takeover can
        # come in between); encoded first, so that a value that cannot be stored writes
        # nothing.
        if state is not None and not messages and not tools and ending is None:
            await self.save_state(state.key, state.value, fence, run_id=run.run_id)
            return None
        row = None if state is None else (state.key, dumps(state.value), run.run_id)
        end = None if ending is None else dumps(ending.metadata)
        now = time.time()
        owner = (run.run_id, run.agent_id, run.session_id, run.principal, run.user_id)
        known = owner in self._homes
        if known and fence is not None and 0 < len(messages) <= FENCED_ROWS:
            flat = _held_turn(run, messages, tools, now)
            if flat is not None:
                # A turn of a run whose home is known, every record held by the next tool
                # message of its call: one statement, its own transaction, the fence asked by
                # the statement itself (decision 0052); with a state row or an end, all in one
                # transaction.
                if row is None and end is None:
                    await self._run(
                        "record turn",
                        lambda conn: _insert_fenced(conn, flat, fence, self._check_fence),
                    )
                    await self._count_commit()
                    return None

                def held(conn: sqlite3.Connection) -> ProofRecord | None:
                    _insert_fenced(conn, flat, fence, self._check_fence)
                    if row is not None:
                        conn.execute(_STATE_UPSERT, row)
                    if ending is None or end is None:
                        return None
                    return self._end(conn, run.run_id, ending, end)

                return await self._write("record turn", held)
        rows = [
            (
                run.agent_id,
                run.session_id,
                run.run_id,
                m.role,
                m.content,
                now,
                m.tool_call_id,
                _calls_text(m),
                m.name,
                int(m.is_error),
                run.principal,
                run.user_id,
                run.attempt,
            )
            for m in messages
        ]
        places = _tool_messages(run.run_id, messages, tools)
        arguments = [_encode_arguments(dict(t.arguments)) for t in tools]

        def write(conn: sqlite3.Connection) -> tuple[bool, ProofRecord | None]:
            # (An end alone writes no history: where its records would go is not asked.)
            home = known or (
                bool(rows or tools) and conn.execute(_RUN_HOME, owner).fetchone() is not None
            )
            # Held in the history only when the run's records are read from there: the run
            # was started (schema 10) by this owner; else every record is kept apart.
            values, apart = _place(rows, messages, tools, arguments, places, home)
            if not apart and fence is not None and values:
                _insert_fenced(conn, list(chain.from_iterable(values)), fence, self._check_fence)
            else:
                self._check_fence(conn, fence)
                if not apart:
                    if values:
                        conn.executemany(_INSERT_ENTRY, values)
                else:
                    self._insert_apart(conn, values, apart)
            if row is not None:
                conn.execute(_STATE_UPSERT, row)
            if ending is None or end is None:
                return home, None
            return home, self._end(conn, run.run_id, ending, end)

        home, proof = await self._write("record turn", write)
        if home and not known:
            self._remember_home(owner)
        return proof

    @staticmethod
    def _insert_apart(
        conn: sqlite3.Connection,
        values: list[tuple[Any, ...]],
        apart: list[tuple[int | None, ToolRecord, str]],
    ) -> None:
        """A turn's history rows with tool records kept apart, each naming the entry it
        follows: the ids of this turn's entries, and the last one before them."""
        before = conn.execute("SELECT max(id) FROM conversation_history").fetchone()[0]
        ids = [conn.execute(_INSERT_ENTRY, v).lastrowid for v in values]
        conn.executemany(
            "INSERT OR IGNORE INTO tool_records (run_id, call_id, name, arguments,"
            " content, is_error, created_at, after_history_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    t.run_id,
                    t.call_id,
                    t.name,
                    encoded,
                    t.content,
                    int(t.is_error),
                    t.created_at,
                    (before or 0) if after is None else ids[after],
                )
                for after, t, encoded in apart
            ],
        )

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        # No notification crosses processes on a file: this process's own requests wake at
        # once, the others' are found by the caller's next poll.
        with trio.move_on_after(seconds):
            await self._appended.wait()

    def _tool_records(self, conn: sqlite3.Connection, run_id: str) -> list[ToolRecord]:
        """The run's records in call order, from both places (``_TOOL_RECORDS``); of two with
        one call id the first, as ``INSERT OR IGNORE`` kept it."""
        home = conn.execute(
            "SELECT session_id, agent_id, principal, user_id, first_history_id FROM runs"
            " WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        # No run (or none started with schema 10): no record held in the history; session
        # NULL matches no entry.
        owner = home if home is not None and home[4] is not None else (None,) * 5
        records: dict[str, ToolRecord] = {}
        for row in conn.execute(_TOOL_RECORDS, (*owner, run_id, run_id)):
            record = TOOL_RECORD.decode(row, run_id=run_id)
            records.setdefault(record.call_id, record)
        return list(records.values())

    def _announced(self) -> None:
        """Wake this process's waiters for run events and cancellation requests."""
        self._appended.set()
        self._appended = trio.Event()

    def _pruned(self, total: Pruned) -> None:
        # A run whose row is gone is no longer a known home (decision 0047).
        if total.runs:
            self._homes.clear()

    def _lease_to_grant(
        self, conn: sqlite3.Connection, key: str
    ) -> tuple[Lease | None, int, float]:
        # BEGIN IMMEDIATE: this transaction is the file's only writer. Time is the host's.
        now = time.time()
        row = conn.execute(f"SELECT {LEASE.select()} FROM leases WHERE key = ?", (key,)).fetchone()
        if row is None:  # never granted, or pruned: above the pruned tokens' high-water mark
            return None, high_water(conn) + 1, now
        current = LEASE.decode(row, key=key, now=now)
        return current, int(LEASE.value(row, "token")) + 1, now  # released ones included

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        def newest(conn: sqlite3.Connection) -> int:
            return self._newest_event(conn, run_id)

        with trio.move_on_after(seconds):
            while True:
                appended = self._appended
                if await self._read("read run events", newest) > after:
                    return True
                with trio.move_on_after(RUN_EVENTS_POLL):
                    await appended.wait()  # this process's appends wake at once
        return False

    # -- counter store -----------------------------------------------------------------------------

    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        def write(conn: sqlite3.Connection) -> float | None:
            now = time.time()
            conn.execute("DELETE FROM counters WHERE updated_at < ?", (now - COUNTERS_KEPT,))
            row = conn.execute("SELECT total FROM counters WHERE key = ?", (key,)).fetchone()
            total = (float(row[0]) if row else 0.0) + amount
            if amount >= 0 and limit is not None and total > limit:
                return None  # refused: nothing added
            conn.execute(
                "INSERT INTO counters (key, total, updated_at) VALUES (?, ?, ?) ON CONFLICT (key)"
                " DO UPDATE SET total = excluded.total, updated_at = excluded.updated_at",
                (key, total, now),
            )
            return total

        return await self._write("spend", write)


COUNTERS_KEPT = 2 * 86400.0  # seconds a counter not written to is kept
# The SELECT list of a history entry, its reply metadata joined (``ENTRY_METADATA``).
_ENTRY_COLUMNS = HISTORY.select("h", metadata=ENTRY_METADATA)
# Built once: json.dumps given any option builds a JSONEncoder per call (this is every turn's).
_encode_arguments = json_encoder(default=str)  # json.dumps(value, default=str), built once
_encode_calls = json_encoder()  # json.dumps(value)


def _place(
    rows: list[tuple[Any, ...]],
    messages: Sequence[Message],
    tools: Sequence[ToolRecord],
    arguments: list[str],
    places: list[int | None],
    home: bool,
) -> tuple[list[tuple[Any, ...]], list[tuple[int | None, ToolRecord, str]]]:
    """The turn's history rows with the records they hold, and the records kept apart, each
    with the index of the message holding the last record held before it (decision 0047)."""
    held: dict[int, tuple[str, str | None, float]] = {}
    apart: list[tuple[int | None, ToolRecord, str]] = []
    follows = None  # the message holding the last record held so far
    for t, encoded, index in zip(tools, arguments, places, strict=True):
        if index is None or not home:
            apart.append((follows, t, encoded))
        else:
            content = None if t.content == messages[index].content else t.content
            held[index] = (encoded, content, t.created_at)
            follows = index
    return [(*row, *held.get(n, _NOT_HELD)) for n, row in enumerate(rows)], apart


def _calls_text(message: Message) -> str | None:
    """A message's tool calls as stored: JSON, or None when it asks none."""
    calls = message.tool_calls
    if not calls:
        return None
    return _encode_calls(
        [{"id": c.id, "name": c.name, "arguments": dict(c.arguments)} for c in calls]
    )


def _held_turn(
    run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord], now: float
) -> list[Any] | None:
    """The values of the turn's history rows, one after another, when each record is held by
    a tool message of its run, call id, name and error status, found in the order of the
    records (as :func:`_tool_messages` and :func:`_place` place them); else None. One pass:
    this is every tool turn's path."""
    flat: list[Any] = []
    base = (run.agent_id, run.session_id, run.run_id)
    tail = (run.principal, run.user_id, run.attempt)
    waiting, count = 0, len(tools)  # the next record to place
    for m in messages:
        held: tuple[Any, ...] = _NOT_HELD
        if waiting < count and m.role == "tool":
            t = tools[waiting]
            if (
                t.call_id == m.tool_call_id
                and t.run_id == run.run_id
                and t.name == m.name
                and t.is_error == m.is_error
            ):
                content = None if t.content == m.content else t.content
                held = (_encode_arguments(dict(t.arguments)), content, t.created_at)
                waiting += 1
        flat += base
        flat += (m.role, m.content, now, m.tool_call_id, _calls_text(m), m.name, int(m.is_error))
        flat += tail
        flat += held
    return flat if waiting == count else None


def _insert_fenced(
    conn: sqlite3.Connection,
    flat: list[Any],
    fence: Lease,
    check_fence: Callable[[sqlite3.Connection, Lease], None],
) -> None:
    """History rows (their values one after another) inserted only while the lease holds,
    ``FENCED_ROWS`` to a statement: no id needed (the rowid's own append is the fastest), and
    the fence asked by the statement, not by one of its own. Out of a transaction (at most
    ``FENCED_ROWS`` rows) the statement is its own transaction, and SQLite takes the write
    lock before it reads the lease, as BEGIN IMMEDIATE does. When rows were not inserted the
    lease is read to say why."""
    lease = (fence.key, fence.token, fence.owner.id)
    step = FENCED_ROWS * _ROW_VALUES
    for start in range(0, len(flat), step):
        chunk = flat[start : start + step]  # a copy: the lease's values go after its rows
        rows = len(chunk) // _ROW_VALUES
        sql = _FENCED_INSERTS.get(rows)
        if sql is None:
            sql = _FENCED_INSERTS.setdefault(rows, _fenced_insert(rows))
        chunk += lease
        cursor = conn.execute(sql, chunk)
        if cursor.rowcount != rows:
            check_fence(conn, fence)
            raise LeaseLost(fence.key, fence.token, None)  # not reached: tokens only grow


_STATE_UPSERT = state_upsert(SQLITE)  # a state row in a turn's transaction (record_turn)
_NOT_HELD = (None, None, None)  # the record columns of an entry holding no tool record
_INSERT_ENTRY = (
    "INSERT INTO conversation_history (agent_id, session_id, run_id, role, content,"
    " created_at, tool_call_id, tool_calls, name, is_error, principal, user_id, attempt,"
    " record_arguments, record_content, record_created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


# The same for n rows in one statement, under a lease: rows only while the lease (key, token,
# owner) holds. Made once per row count (a turn's messages: 1 + its tool calls).
_ROW_VALUES = _INSERT_ENTRY.count("?")  # the values of one history row


def _fenced_insert(rows: int) -> str:
    one = "(" + ", ".join("?" * _ROW_VALUES) + ")"
    columns = _INSERT_ENTRY[: _INSERT_ENTRY.index(" VALUES (")]
    return (
        f"{columns} SELECT * FROM (VALUES {', '.join([one] * rows)})"
        " WHERE EXISTS (SELECT 1 FROM leases WHERE key = ? AND token = ? AND owner_id = ?)"
    )


_FENCED_INSERTS: dict[int, str] = {}
# The run's first history id, when the run was started by this owner with schema 10.
_RUN_HOME = (
    "SELECT first_history_id FROM runs WHERE run_id = ? AND agent_id = ? AND session_id = ?"
    " AND principal IS ? AND user_id IS ? AND first_history_id IS NOT NULL"
)
# A run's tool records from both places, in call order: those held in its history entries
# (found through history_by_owner, from the run's first history id) and those kept apart,
# each after the entry it followed (schema 9's, NULL, before every entry).
_TOOL_RECORDS = (
    "SELECT call_id, name, arguments, content, is_error, created_at FROM ("
    " SELECT tool_call_id AS call_id, name, record_arguments AS arguments,"
    " COALESCE(record_content, content) AS content, is_error, record_created_at AS created_at,"
    " id AS position, 0 AS apart, 0 AS seq FROM conversation_history"
    " WHERE session_id = ? AND agent_id = ? AND principal IS ? AND user_id IS ? AND id > ?"
    " AND run_id = ? AND record_arguments IS NOT NULL"
    " UNION ALL SELECT call_id, name, arguments, content, is_error, created_at,"
    " COALESCE(after_history_id, -1), 1, seq FROM tool_records WHERE run_id = ?"
    ") ORDER BY position, apart, seq"
)


def _tool_messages(
    run_id: str, messages: Sequence[Message], tools: Sequence[ToolRecord]
) -> list[int | None]:
    """For each record, the index of the tool message holding it, or None (kept apart): the
    next tool message of its call id, name and error status, in the order of the records (so
    that one call order runs through both places)."""
    places: list[int | None] = []
    start = 0
    for t in tools:
        found = None
        if t.run_id == run_id:
            for index in range(start, len(messages)):
                m = messages[index]
                if (
                    m.role == "tool"
                    and m.tool_call_id == t.call_id
                    and m.name == t.name
                    and m.is_error == t.is_error
                ):
                    found = index
                    break
        if found is not None:
            start = found + 1
        places.append(found)
    return places


if TYPE_CHECKING:

    def _plays_every_role(store: SQLiteStore) -> Store:
        return store


def _nowhere(*args: object, **kwargs: object) -> bool:
    return False
