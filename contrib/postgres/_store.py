"""The PostgreSQL store: every role of ``soulacy_store`` on one server, shared by every process.

psycopg 3's async API runs on asyncio only, so every call runs psycopg's synchronous API in a
Trio worker thread. A ``CapacityLimiter`` of ``pool_size`` threads hands out the connections of
a ``psycopg_pool.ConnectionPool`` of the same size: calls beyond it wait in Trio, not in
threads. Connections are in autocommit mode; each write is one explicit transaction, or one
statement that is its own (a turn, a state row, a counter's spend: one round trip).

Locking, in the order a transaction takes them (so no two transactions wait for each other in
a cycle):

* a write made under a lease (``fence=``) first reads the lease row ``FOR SHARE``: a takeover,
  renewal or release (which lock the row ``FOR UPDATE`` / update it) cannot come between the
  check and the write, while writes under one lease do not wait for each other;
* ``acquire_lease`` makes sure the row exists (``INSERT … ON CONFLICT DO NOTHING``: two first
  askers cannot both insert), then locks it ``FOR UPDATE``; the lease's queue is only touched
  under that lock;
* ``start_run`` and ``finalize_proof`` then take a transaction-scoped advisory lock of the run
  id: concurrent finalizations wait for each other, and the second returns the first's proof;
* ``start_run`` then locks the run's row (``FOR UPDATE``), which ``finish_run`` updates: a
  retry reads the last attempt's ending, keeps it in ``attempt_endings`` and resets the row
  with no ``finish_run`` in between.

Time is the server's: every expiry is judged by ``clock_timestamp()`` (epoch seconds) read
inside the transaction, after its locks are held, never by the caller's clock.

Serialization failures and deadlocks are retried (at most :data:`MAX_RETRIES` times, with a
short random backoff); so is a connection found broken before the transaction's COMMIT was sent
(the server rolled it back), and, for a write that is one statement, a connection the server
had closed before the statement was sent, or that it ended instead of running the statement
(``AdminShutdown``). Everything else is a :class:`StorageError` saying what happened in
plain words (connection refused, connection dropped, statement timeout, disk full …), with the
DSN's password never shown.

The statements it shares with the SQLite store are ``SQLStore``'s (``soulacy.plugins.sqlkit``).
"""

from __future__ import annotations

import errno
import math
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import psycopg
import trio
from psycopg import errors as pg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from soulacy.kernel import json_encoder, redact_text
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    Ending,
    HistoryEntry,
    Lease,
    ProofRecord,
    RunRecord,
    StateRow,
    StorageError,
    ToolRecord,
)
from soulacy.plugins.sqlkit import (
    HISTORY,
    LEASE,
    POSTGRES,
    TOOL_RECORD,
    Schema,
    SQLStore,
    dumps,
    state_upsert,
)

from ._inline import Row, Statements
from ._notify import Listener
from ._schema import (
    SCHEMA_VERSION,
    Connection,
    NewerSchema,
    migrate,
    refuse_newer,
    schema_version,
)

if TYPE_CHECKING:
    from soulacy.kernel.store import Store

T = TypeVar("T")

MAX_RETRIES = 5  # serialization failures and deadlocks, then broken connections (below)
MAX_RECONNECTS = 2  # a connection found broken before COMMIT: retried on a fresh one
QUICK_CHECKOUT = 1.0  # seconds waited for a pooled connection before connecting directly
IDLE_CHECKOUT = 0.001  # seconds the Trio thread waits for a connection the pool says is idle
COUNTERS_KEPT = 2 * 86400.0  # seconds a counter not written to is kept
HOUSEKEEPING_EVERY = 600.0  # seconds between two sweeps of old counters by one store
POLL_LISTENING = 5.0  # seconds between two looks while notifications arrive (a safety net)
POLL_DEAF = 0.25  # seconds between two looks while the listening connection is down
# Cancellation requests are inserted one at a time (their ids then commit in order, and a
# poller that saw id n never misses a smaller id committed later).
CANCEL_LOCK = 0x736F756C61637902
MASK = "***"

_NOW = POSTGRES.now  # the server's clock, epoch seconds
_text = POSTGRES.text  # NUL characters, which text cannot hold, as U+FFFD
_encode = json_encoder(default=str)  # json.dumps(value, default=str), built once

# How a body runs on its connection (``_run``).
READ = 0  # autocommitted statements
TRANSACTION = 1  # one transaction, committed when the body returns
STATEMENT = 2  # one writing statement, its own transaction (no BEGIN, no COMMIT)


class _CommitUnknown(Exception):
    """The connection broke while COMMIT was under way: the write may or may not be stored."""


def describe_dsn(dsn: str) -> str:
    """Where the data is, as a URI without the password: ``postgresql://user@host:port/db``
    (a Unix socket's folder as ``?host=``)."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "(a DSN that cannot be read)"
    host = str(params.get("host") or params.get("hostaddr") or "")
    port = f":{params['port']}" if params.get("port") else ""
    user = f"{params['user']}@" if params.get("user") else ""
    dbname = str(params.get("dbname") or "")
    if host.startswith("/"):  # a socket folder
        return f"postgresql://{user}{port}/{dbname}?host={host}"
    return f"postgresql://{user}{host}{port}/{dbname}"


def _password(dsn: str) -> str | None:
    try:
        value = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        return None
    return str(value) if value else None


def _flat(text: str) -> str:
    return " ".join(text.split())


def plain_cause(exc: BaseException) -> str:
    """What went wrong, in words a person acts on."""
    if isinstance(exc, _CommitUnknown):
        return "connection dropped while committing: the write may or may not have been stored"
    if isinstance(exc, PoolTimeout):
        return "no connection to the server in time"
    if isinstance(exc, pg.QueryCanceled):
        if "statement timeout" in str(exc):
            return "statement timeout"
        return "statement cancelled"
    if isinstance(exc, pg.LockNotAvailable):
        return "lock timeout"
    if isinstance(exc, pg.DiskFull):
        return "disk full"
    if isinstance(exc, pg.OutOfMemory):
        return "out of memory on the server"
    if isinstance(exc, pg.TooManyConnections):
        return "too many connections to the server"
    if isinstance(exc, pg.AdminShutdown | pg.CrashShutdown | pg.CannotConnectNow):
        return "the server is shutting down or starting up"
    if isinstance(exc, pg.ReadOnlySqlTransaction):
        return "read-only (a standby server, or a read-only kernel)"
    if isinstance(exc, pg.InsufficientPrivilege):
        return "permission denied"
    if isinstance(exc, pg.InvalidPassword | pg.InvalidAuthorizationSpecification):
        return "authentication failed"
    if isinstance(exc, pg.InvalidCatalogName):
        return "the database does not exist"
    if isinstance(exc, pg.UndefinedTable | pg.UndefinedColumn):
        return "the Soulacy tables are missing or older than this release's"
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc).lower()
        for needle, cause in (
            ("connection refused", "connection refused"),
            ("no such file or directory", "connection refused (no server at that socket)"),
            ("timeout expired", "connection timed out"),
            ("could not translate host name", "unknown host"),
            ("name or service not known", "unknown host"),
            ("password authentication failed", "authentication failed"),
            ("no password supplied", "authentication failed (no password)"),
            ("does not exist", "the database or role does not exist"),
            ("not currently accepting connections", "the database does not accept connections"),
            ("server closed the connection", "connection dropped"),
            ("terminating connection", "connection dropped"),
            ("consuming input failed", "connection dropped"),
            ("connection is closed", "connection dropped"),
            ("connection is lost", "connection dropped"),
            ("sending query", "connection dropped"),
        ):
            if needle in text:
                return cause
        return "connection failed"
    if isinstance(exc, psycopg.DataError):
        return "a value the database refused"
    if isinstance(exc, UnicodeError):
        return "text that is not valid Unicode"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk full"
    return "database error"


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, pg.SerializationFailure | pg.DeadlockDetected)


CONFLICT = 1  # made again after a short backoff
RECONNECT = 2  # made again on another connection


def _again(
    exc: psycopg.Error, conn: Connection, committing: bool, conflicts: int, reconnects: int
) -> int:
    """Whether an attempt that failed with ``exc`` on ``conn`` is made again (:data:`CONFLICT`,
    :data:`RECONNECT`); else raises what the caller reports. ``committing``: the COMMIT, or
    the statement that commits by itself, was sent."""
    if _retryable(exc) and conflicts < MAX_RETRIES:
        return CONFLICT
    # A session the server ended (``AdminShutdown``: a restart, a terminated backend) answers
    # the statement with that error and runs nothing: the server ends a session between two
    # commands, never inside a commit.
    if conn.broken and committing and not isinstance(exc, pg.AdminShutdown):
        raise _CommitUnknown(str(exc)) from exc
    if not conn.broken or reconnects >= MAX_RECONNECTS:
        raise exc
    # Nothing was committed (the server rolls back a transaction whose connection is gone):
    # again, on a connection that works.
    return RECONNECT


def _idle(pool: ConnectionPool[Connection]) -> Connection | None:
    """A connection the pool has idle now, or None (the Trio thread does not wait for one)."""
    if not pool.get_stats().get("pool_available"):
        return None
    try:
        return pool.getconn(timeout=IDLE_CHECKOUT)
    except PoolTimeout:
        return None  # taken meanwhile


def _execute(conn: Connection, sql: str, args: Sequence[Any]) -> tuple[int, Row | None]:
    """:meth:`PostgresStore._statement_row` in a worker thread."""
    cursor = conn.execute(sql, args)
    row = cursor.fetchone() if cursor.description else None
    return cursor.rowcount, None if row is None else [None if v is None else str(v) for v in row]


class PostgresStore(SQLStore[Connection]):
    """Every role of the store in one PostgreSQL database: history, runs, tool records,
    proofs, checkpoints, plugin state, leases (with their queues), cancel requests and
    counters, shared by every process (and host) that opens it."""

    multi_process: ClassVar[bool] = True  # every process on the server shares it
    dialect = POSTGRES
    retention = Schema(POSTGRES, keeps_newest=False, first_history_id="-1")
    runs_order = "r.started_at DESC, r.run_id"

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 10,
        statement_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self._dsn = dsn
        self._secret = _password(dsn)
        self.pool_size = pool_size
        self.statement_timeout = statement_timeout  # seconds; 0: none
        self.connect_timeout = connect_timeout  # seconds; 0: libpq waits as long as it takes
        # Read-only: nothing is created or migrated, and every transaction is read-only.
        self.read_only = read_only
        self.migrated_from: int | None = None
        self._pool: ConnectionPool[Connection] | None = None
        self._opening = trio.Lock()
        # One thread, or one statement on the Trio thread, per pooled connection.
        self._limiter = trio.CapacityLimiter(pool_size)
        self._statements = Statements()  # prepared for the Trio thread's statements
        self._swept_at = -math.inf  # time.monotonic() of the last sweep of old counters
        self._events_swept_at = -math.inf  # the same, for old run events
        self._listener = Listener(lambda: psycopg.connect(self._dsn, **self._connect_args()))
        # Starts background work in the kernel's nursery (``Kernel.start_soon``, set by the
        # plugin); False when there is none (the kernel is not open): waiters then poll.
        self.start_soon: Callable[..., bool] = lambda *args, **kwargs: False

    # -- plumbing ------------------------------------------------------------------------------

    def describe(self) -> str:
        """Where the data is, for messages naming the store (no password)."""
        return describe_dsn(self._dsn)

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, MASK)
        return redact_text(text)

    def _error(self, what: str, exc: BaseException) -> StorageError:
        detail = _flat(str(exc)) or type(exc).__name__
        if isinstance(exc, psycopg.Error | PoolTimeout):
            detail = f"{type(exc).__name__}: {detail}"
        message = (
            f"PostgreSQL store {self.describe()}: {what} failed: {plain_cause(exc)} ({detail})"
        )
        return StorageError(self._scrub(message))

    def _connect_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"autocommit": True}
        if self.connect_timeout > 0:
            args["connect_timeout"] = max(1, math.ceil(self.connect_timeout))
        return args

    def _configure(self, conn: Connection) -> None:
        """Every connection's session settings (run by the pool on each new connection)."""
        statement_ms = round(self.statement_timeout * 1000)
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{statement_ms}",))
        # A process stopped in the middle of a transaction (SIGSTOP, a debugger) would keep its
        # row locks, and with them every lease it touched: the server ends such a session.
        idle_ms = max(statement_ms, 5000) if statement_ms else 0
        conn.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
            (f"{idle_ms}",),
        )
        # The locking above assumes READ COMMITTED (a statement after a lock wait sees what the
        # other transaction committed), whatever the database's default.
        conn.execute("SELECT set_config('default_transaction_isolation', 'read committed', false)")
        if self.read_only:
            conn.execute("SELECT set_config('default_transaction_read_only', 'on', false)")

    def _open_pool(self) -> ConnectionPool[Connection]:
        """In a worker thread: connect, migrate (or check the schema, read-only), then open the
        pool. Connecting directly first makes a server that is down fail at once, saying why."""
        with psycopg.connect(self._dsn, **self._connect_args()) as conn:
            self._configure(conn)
            try:
                self.migrated_from = self._check_schema(conn)
            except NewerSchema as exc:
                raise StorageError(
                    self._scrub(f"PostgreSQL store {self.describe()}: {exc}")
                ) from None
        pool: ConnectionPool[Connection] = ConnectionPool(
            self._dsn,
            kwargs=self._connect_args(),
            min_size=1,
            max_size=self.pool_size,
            open=False,
            configure=self._configure,
            timeout=max(self.connect_timeout, 1.0) + 5.0,
            name=f"soulacy {self.describe()}",
        )
        try:
            pool.open(wait=True, timeout=max(self.connect_timeout, 1.0) + 5.0)
        except BaseException:
            pool.close()
            raise
        return pool

    def _check_schema(self, conn: Connection) -> int:
        """Migrate (or, read-only, check) the schema; returns the version found."""
        if not self.read_only:
            return migrate(conn)
        found = schema_version(conn)
        refuse_newer(found)
        if found < SCHEMA_VERSION:
            raise StorageError(
                self._scrub(
                    f"PostgreSQL store {self.describe()}: the database's Soulacy schema"
                    f" is version {found}, this release reads version {SCHEMA_VERSION}:"
                    " run `soulacy store migrate` (or any command that writes) first"
                )
            )
        return found

    async def _ready(self, what: str) -> ConnectionPool[Connection]:
        pool = self._pool
        if pool is not None:
            return pool
        async with self._opening:
            if self._pool is None:
                try:
                    self._pool = await trio.to_thread.run_sync(self._open_pool)
                except StorageError:
                    raise
                except (psycopg.Error, PoolTimeout, OSError, UnicodeError) as exc:
                    raise self._error(what, exc) from exc
            return self._pool

    async def _run(self, what: str, body: Callable[[Connection], T], mode: int) -> T:
        """``body`` in a worker thread on a pooled connection, as ``mode`` says (:data:`READ`,
        :data:`TRANSACTION`, :data:`STATEMENT`)."""
        pool = self._pool
        if pool is None:
            pool = await self._ready(what)
        try:
            return await trio.to_thread.run_sync(
                self._attempts, pool, body, mode, limiter=self._limiter
            )
        except StorageError:
            raise  # LeaseLost, or a StorageError of the body's own
        except (psycopg.Error, PoolTimeout, _CommitUnknown, OSError, UnicodeError) as exc:
            raise self._error(what, exc) from exc

    def _checkout(self, pool: ConnectionPool[Connection]) -> tuple[Connection, bool]:
        """A connection and whether it is the pool's. The limiter leaves a thread here only
        when the pool has a connection idle or room to open one, so a wait means the pool
        cannot connect: after :data:`QUICK_CHECKOUT` seconds, connect directly. That says at
        once why not (the server down), or serves this call while the pool, which reconnects
        with a growing backoff, recovers."""
        try:
            return pool.getconn(timeout=QUICK_CHECKOUT), True
        except PoolTimeout:
            pass
        conn = psycopg.connect(self._dsn, **self._connect_args())
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn, False

    def _attempts(
        self, pool: ConnectionPool[Connection], body: Callable[[Connection], T], mode: int
    ) -> T:
        conflicts = reconnects = 0
        while True:
            conn, pooled = self._checkout(pool)
            committing = broken = False
            try:
                if mode == READ:
                    return body(conn)
                if mode == STATEMENT:
                    # What the server sent this idle connection since its last use: nothing,
                    # or its goodbye (a restart, a terminated session). The end of the stream
                    # raises here, before anything is sent: then nothing was written.
                    conn.pgconn.consume_input()
                    committing = True  # the statement commits by itself
                    return body(conn)
                with conn.transaction():
                    result = body(conn)
                    committing = True  # leaving the block sends COMMIT
                return result
            except psycopg.Error as exc:
                if _again(exc, conn, committing, conflicts, reconnects) == CONFLICT:
                    conflicts += 1
                    time.sleep(random.uniform(0.005, 0.02) * conflicts)
                    continue
                reconnects += 1
                broken = True
            finally:
                if pooled:
                    pool.putconn(conn)
                else:
                    conn.close()
            if broken and pooled:
                pool.check()  # its other idle connections may be as dead (a server restart)

    async def _read(self, what: str, body: Callable[[Connection], T]) -> T:
        return await self._run(what, body, READ)

    async def _write(self, what: str, body: Callable[[Connection], T]) -> T:
        return await self._run(what, body, TRANSACTION)

    async def _statement(self, what: str, sql: str, args: Sequence[Any]) -> int:
        return (await self._statement_row(what, sql, args))[0]

    async def _statement_row(
        self, what: str, sql: str, args: Sequence[Any]
    ) -> tuple[int, Row | None]:
        """One writing statement, its own transaction (``sql`` in psycopg's placeholders, its
        arguments typed by the statement): how many rows it wrote or returned, and its first
        row as text. Sent from the Trio thread on an idle pooled connection (``_inline``), else
        (none idle, or a first attempt to be made again) in a worker thread. Once sent, it runs
        to its end, as a worker thread's call does: a cancellation waits for it."""
        pool = self._pool
        if pool is None:
            pool = await self._ready(what)
        try:
            self._limiter.acquire_nowait()  # the uncontended path does not yield
        except trio.WouldBlock:
            await self._limiter.acquire()
        try:
            conn = _idle(pool)
            if conn is not None:
                with trio.CancelScope(shield=True):
                    done = await self._inline(what, pool, conn, sql, args)
                if done is not None:
                    return done
        finally:
            self._limiter.release()
        return await self._run(what, lambda conn: _execute(conn, sql, args), STATEMENT)

    async def _inline(
        self,
        what: str,
        pool: ConnectionPool[Connection],
        conn: Connection,
        sql: str,
        args: Sequence[Any],
    ) -> tuple[int, Row | None] | None:
        """One attempt on the Trio thread; None: to be made again (in a worker thread)."""
        committing = broken = False
        try:
            conn.pgconn.consume_input()  # as in _attempts: a goodbye seen before sending
            committing = True
            return await self._statements.execute(conn, sql, args)
        except psycopg.Error as exc:
            try:
                again = _again(exc, conn, committing, 0, 0)
            except (psycopg.Error, _CommitUnknown) as final:
                raise self._error(what, final) from final
            broken = again == RECONNECT
        except (OSError, UnicodeError) as exc:
            raise self._error(what, exc) from exc
        finally:
            pool.putconn(conn)
        if broken:
            await trio.to_thread.run_sync(pool.check)  # as in _attempts
        else:
            await trio.sleep(random.uniform(0.005, 0.02))  # a conflict's backoff
        return None

    async def open(self) -> int:
        """Connect and migrate as needed; returns the schema version it migrated from."""
        await self._ready("open")
        return int(self.migrated_from or 0)

    async def aclose(self) -> None:
        self._listener.close()
        async with self._opening:
            pool, self._pool = self._pool, None
            if pool is not None:
                await trio.to_thread.run_sync(pool.close)

    # -- conversation store ----------------------------------------------------------------------

    async def _entries(self, what: str, where: str, args: tuple[Any, ...]) -> list[HistoryEntry]:
        sql = POSTGRES.sql(
            f"SELECT {HISTORY.select('h')} FROM conversation_history AS h WHERE {where}"
            " ORDER BY h.id"
        )

        def read(conn: Connection) -> list[HistoryEntry]:
            rows = conn.execute(sql, args).fetchall()
            # Reply metadata is kept once per attempt (docs/decisions/0045): an entry without
            # its own reads its attempt's, looked up once per run, not joined per entry.
            value = HISTORY.value
            endings = _attempt_endings(
                conn,
                {
                    value(r, "run_id")
                    for r in rows
                    if value(r, "metadata") is None and value(r, "run_id") is not None
                },
            )
            entries = []
            for r in rows:
                if value(r, "metadata") is None and endings:
                    key = (value(r, "run_id"), int(value(r, "attempt")))
                    entries.append(HISTORY.decode(r, metadata=endings.get(key)))
                else:
                    entries.append(HISTORY.decode(r))
            return entries

        return await self._read(what, read)

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
        if not messages and not tools and ending is None:
            if state is not None:
                await self.save_state(state.key, state.value, fence, run_id=run.run_id)
            if fence is None or state is not None:
                return None
        # A state row is a part of the same statement (or transaction): encoded first, so
        # that a value that cannot be stored writes nothing.
        row = [] if state is None else [state.key, dumps(state.value), run.run_id]
        end = None if ending is None else dumps(ending.metadata)
        base = (run.agent_id, run.session_id, run.run_id)
        tail = (run.principal, run.user_id, run.attempt)
        # The lease's key, token and owner first: the statement reads the lease first.
        values: list[Any] = [] if fence is None else [fence.key, fence.token, fence.owner.id]
        for m in messages:
            calls = (
                _encode(
                    [
                        {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                        for c in m.tool_calls
                    ]
                )
                if m.tool_calls
                else None
            )
            values += base
            values += (m.role, _text(m.content), m.tool_call_id, calls, m.name, m.is_error)
            values += tail
        for t in tools:
            values += (
                t.run_id,
                t.call_id,
                t.name,
                _encode(dict(t.arguments)),
                _text(t.content),
                t.is_error,
                float(t.created_at),
            )
        if len(values) + len(row) > MAX_ARGUMENTS:  # thousands of messages: several statements
            rows = values[3:] if fence is not None else values

            def apart(conn: Connection) -> ProofRecord | None:
                self._turn_apart(conn, rows, len(messages), fence, row)
                if ending is None or end is None:
                    return None
                return self._end(conn, run.run_id, ending, end)

            return await self._write("record turn", apart)
        values += row
        shape = (len(messages), len(tools), fence is not None, state is not None)
        sql = _TURNS.get(shape) or _TURNS.setdefault(shape, _turn_statement(*shape))
        if ending is not None and end is not None:
            # The last turn and the run's end (its status, its proof made from the run's
            # records with this turn's): one transaction, the turn's statement first, its
            # fence's lease row locked until the commit.
            turn = bool(messages or tools or row)

            def last(conn: Connection) -> ProofRecord:
                if turn and fence is not None:
                    if not conn.execute(sql, values).rowcount:
                        self._lease_lost(conn, fence)
                else:
                    self._check_fence(conn, fence)
                    if turn:
                        conn.execute(sql, values)
                return self._end(conn, run.run_id, ending, end)

            return await self._write("record turn", last)

        # One statement, its own transaction: every row, under the lease (decision 0052's
        # shape on PostgreSQL; docs/performance/0080).
        if not await self._statement("record turn", sql, values) and fence is not None:
            await self._read("record turn", lambda conn: self._lease_lost(conn, fence))
        return None

    def _turn_apart(
        self,
        conn: Connection,
        values: list[Any],
        rows: int,
        fence: Lease | None,
        state: list[Any],
    ) -> None:
        """A turn too large for one statement's arguments (and its state row, when ``state``
        holds its arguments), inside a transaction."""
        self._check_fence(conn, fence)
        if state:
            conn.execute(_STATE_UPSERT, state)
        with conn.cursor() as cursor:
            width = _HISTORY_ROW.count("%s")
            if rows:
                history = values[: rows * width]
                cursor.executemany(
                    f"INSERT INTO conversation_history {_HISTORY_COLUMNS} VALUES {_HISTORY_ROW}",
                    [history[i : i + width] for i in range(0, len(history), width)],
                )
            records = values[rows * width :]
            if records:
                width = _RECORD_ROW.count("%s")
                cursor.executemany(
                    f"INSERT INTO tool_records {_RECORD_COLUMNS} VALUES {_RECORD_ROW}"
                    " ON CONFLICT (run_id, call_id) DO NOTHING",
                    [records[i : i + width] for i in range(0, len(records), width)],
                )

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        await self._listener.start(self.start_soon)
        with trio.move_on_after(seconds):
            await self._listener.cancel_event().wait()

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        def newest(conn: Connection) -> int:
            return self._newest_event(conn, run_id)

        await self._listener.start(self.start_soon)
        with trio.move_on_after(seconds):
            while True:
                announced = self._listener.run_event(run_id)  # taken before the look
                try:
                    if await self._read("read run events", newest) > after:
                        return True
                    poll = POLL_LISTENING if self._listener.listening else POLL_DEAF
                    with trio.move_on_after(poll):
                        await announced.wait()
                finally:
                    self._listener.forget(run_id, announced)
        return False

    # -- what the shared statements leave to the store ------------------------------------------

    def _lock_run(self, conn: Connection, run_id: str) -> None:
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"soulacy:run:{run_id}",)
        )

    def _lock_cancels(self, conn: Connection) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (CANCEL_LOCK,))

    def _announce(self, conn: Connection, channel: str, payload: str) -> None:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))  # sent on COMMIT

    def _lease_to_grant(self, conn: Connection, key: str) -> tuple[Lease | None, int, float]:
        # The row locked, then the clock read and the high-water mark (a prune that deleted
        # the row has committed): a token is never reused.
        row = _locked_lease_row(conn, key)
        now = self._now(conn)
        token = max(int(LEASE.value(row, "token")), int(row[-1])) + 1
        return LEASE.decode(row, key=key, now=now), token, now

    def _tool_records(self, conn: Connection, run_id: str) -> list[ToolRecord]:
        rows = conn.execute(
            f"SELECT {TOOL_RECORD.select()} FROM tool_records WHERE run_id = %s ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [TOOL_RECORD.decode(r, run_id=run_id) for r in rows]

    # -- counter store -----------------------------------------------------------------------------

    async def spend(self, key: str, amount: float, limit: float | None = None) -> float | None:
        amount = float(amount)
        # One statement each way, atomic by itself: the row is locked by the upsert and the
        # limit checked against its latest total.
        if limit is None or amount < 0:
            query = (
                f"INSERT INTO counters AS c (key, total, updated_at) VALUES (%s, %s, {_NOW})"
                " ON CONFLICT (key) DO UPDATE SET total = c.total + excluded.total,"
                " updated_at = excluded.updated_at RETURNING total"
            )
            args: tuple[Any, ...] = (key, amount)
        elif amount > limit:  # a new counter would pass the limit at once: only an old one may
            query = (
                f"UPDATE counters SET total = total + %s, updated_at = {_NOW}"
                " WHERE key = %s AND total + %s <= %s RETURNING total"
            )
            args = (amount, key, amount, float(limit))
        else:
            query = (
                f"INSERT INTO counters AS c (key, total, updated_at) VALUES (%s, %s, {_NOW})"
                " ON CONFLICT (key) DO UPDATE SET total = c.total + excluded.total,"
                " updated_at = excluded.updated_at WHERE c.total + excluded.total <= %s"
                " RETURNING total"
            )
            args = (key, amount, float(limit))
        sweep = time.monotonic() - self._swept_at > HOUSEKEEPING_EVERY
        if sweep:
            self._swept_at = time.monotonic()

        _, row = await self._statement_row("spend", query, args)
        total = float(row[0]) if row and row[0] is not None else None  # None: refused
        if sweep:
            await self._sweep_counters()
        return total

    async def _sweep_counters(self) -> None:
        """Drop counters not written to for two days (their window is long past)."""
        try:
            await self._write(
                "sweep old counters",
                lambda conn: conn.execute(
                    f"DELETE FROM counters WHERE updated_at < {_NOW} - %s", (COUNTERS_KEPT,)
                ),
            )
        except StorageError:
            self._swept_at = -math.inf  # housekeeping only: tried again at the next spend


MAX_ARGUMENTS = 65535  # bound arguments of one statement (the protocol's limit)
_HISTORY_COLUMNS = (
    "(agent_id, session_id, run_id, role, content, created_at, tool_call_id, tool_calls, name,"
    " is_error, principal, user_id, attempt)"
)
# Typed where the context does not say (a statement sent from the Trio thread is prepared
# with its arguments' types left to the server).
_HISTORY_ROW = f"(%s, %s, %s, %s, %s, {_NOW}, %s, %s, %s, %s::boolean, %s, %s, %s::integer)"
_RECORD_COLUMNS = "(run_id, call_id, name, arguments, content, is_error, created_at)"
_RECORD_ROW = "(%s, %s, %s, %s, %s, %s::boolean, %s::float8)"
# the statement of each turn's shape (rows, records, fenced, with a state row), made once
_TURNS: dict[tuple[int, int, bool, bool], str] = {}
_STATE_UPSERT = state_upsert(POSTGRES)


def _turn_statement(rows: int, records: int, fenced: bool, stated: bool = False) -> str:
    """A turn of ``rows`` history rows and ``records`` tool records (and, ``stated``, a state
    row) as one statement: its arguments are (``fenced``) the lease's key, token and owner,
    the history rows', the records', the state row's (key, value, run id).
    Fenced, the lease row is read and locked ``FOR SHARE`` first, as ``_check_fence`` does,
    and every row is written only while it holds; the statement returns one row while the
    lease holds (unfenced, always), else none."""
    parts = []
    held = ""
    if fenced:
        parts.append(
            "fence AS MATERIALIZED (SELECT 1 FROM leases WHERE key = %s AND token = %s"
            " AND owner_id = %s FOR SHARE)"
        )
        held = " WHERE EXISTS (SELECT 1 FROM fence)"
    if rows:
        parts.append(
            f"history AS (INSERT INTO conversation_history {_HISTORY_COLUMNS}"
            f" SELECT * FROM (VALUES {', '.join([_HISTORY_ROW] * rows)}) AS v{held})"
        )
    if records:
        parts.append(
            f"records AS (INSERT INTO tool_records {_RECORD_COLUMNS}"
            f" SELECT * FROM (VALUES {', '.join([_RECORD_ROW] * records)}) AS v{held}"
            " ON CONFLICT (run_id, call_id) DO NOTHING)"
        )
    if stated:
        where = "EXISTS (SELECT 1 FROM fence)" if fenced else "TRUE"
        parts.append(f"state AS ({state_upsert(POSTGRES, where)})")
    if not parts:
        return "SELECT 1"
    return f"WITH {', '.join(parts)} SELECT 1{' FROM fence' if fenced else ''}"


def _locked_lease_row(conn: Connection, key: str) -> Sequence[Any]:
    """The lease row of ``key``, locked ``FOR UPDATE``, with the tokens' high-water mark last.

    The row exists before it is locked: two first askers cannot both insert it. A prune may
    delete it between the two statements (it was released): then it is inserted again."""
    while True:
        conn.execute(
            "INSERT INTO leases (key, token) VALUES (%s, 0) ON CONFLICT (key) DO NOTHING",
            (key,),
        )
        row = conn.execute(
            f"SELECT {LEASE.select()}, COALESCE((SELECT token FROM lease_high_water), 0)"
            " FROM leases WHERE key = %s FOR UPDATE",
            (key,),
        ).fetchone()
        if row is not None:
            return row


def _attempt_endings(conn: Connection, run_ids: set[str]) -> dict[tuple[str, int], str]:
    """The reply metadata of each attempt of these runs, by (run id, attempt): the run's own
    for its current attempt, else the stored ending (the run's first: an ending stored for the
    current attempt, of a run finished before it was started, counts only while the run has
    none). One statement, so one snapshot: a retry starting meanwhile is seen whole or not."""
    if not run_ids:
        return {}
    ids = sorted(run_ids)
    rows = conn.execute(
        "SELECT run_id, attempt, metadata, TRUE FROM runs"
        " WHERE run_id = ANY(%s) AND metadata IS NOT NULL"
        " UNION ALL SELECT run_id, attempt, metadata, FALSE FROM attempt_endings"
        " WHERE run_id = ANY(%s)",
        (ids, ids),
    ).fetchall()
    found: dict[tuple[str, int], str] = {}
    for run_id, attempt, metadata, of_the_run in rows:
        key = (run_id, int(attempt))
        if of_the_run or key not in found:
            found[key] = metadata
    return found


if TYPE_CHECKING:

    def _plays_every_role(store: PostgresStore) -> Store:
        return store
