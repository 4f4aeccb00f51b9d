"""The PostgreSQL store: every role of ``soulacy_store`` on one server, shared by every process.

psycopg 3's async API runs on asyncio only, so every call runs psycopg's synchronous API in a
Trio worker thread. A ``CapacityLimiter`` of ``pool_size`` threads hands out the connections of
a ``psycopg_pool.ConnectionPool`` of the same size: calls beyond it wait in Trio, not in
threads. Connections are in autocommit mode; each write is one explicit transaction.

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
(the server rolled it back). Everything else is a :class:`StorageError` saying what happened in
plain words (connection refused, connection dropped, statement timeout, disk full …), with the
DSN's password never shown.
"""

from __future__ import annotations

import errno
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import attrs
import psycopg
import trio
from psycopg import errors as pg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from soulacy.kernel import redact_text
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    CancelRequest,
    Checkpoint,
    EveryPrincipal,
    HistoryEntry,
    Lease,
    LeaseGrant,
    LeaseLost,
    LeaseOwner,
    ProofRecord,
    Pruned,
    RetentionLimits,
    RunEvent,
    RunEventBatch,
    RunEvents,
    RunIdTaken,
    RunRecord,
    StorageError,
    ToolRecord,
    identity_differs,
    make_proof,
    run_as_read,
)

from . import _retention
from ._notify import CANCELS, RUN_EVENTS, Listener
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
CANCEL_KEPT = 3600.0  # seconds a cancellation request is kept
COUNTERS_KEPT = 2 * 86400.0  # seconds a counter not written to is kept
HOUSEKEEPING_EVERY = 600.0  # seconds between two sweeps of old counters by one store
RUN_EVENTS_KEPT = 86400.0  # seconds a run's stream event is kept
POLL_LISTENING = 5.0  # seconds between two looks while notifications arrive (a safety net)
POLL_DEAF = 0.25  # seconds between two looks while the listening connection is down
# Cancellation requests are inserted one at a time (their ids then commit in order, and a
# poller that saw id n never misses a smaller id committed later).
CANCEL_LOCK = 0x736F756C61637902
MASK = "***"

_NOW = "extract(epoch FROM clock_timestamp())::float8"  # the server's clock, epoch seconds
_RUN_COLUMNS = (
    "run_id, agent_id, session_id, user_id, principal, status, verification, incomplete_reason,"
    " metadata, started_at, finished_at, attempt, lease_key"
)
_LEASE_COLUMNS = "token, owner_id, pid, host, boot, holder, acquired_at, renewed_at, expires_at"
_HISTORY_COLUMNS = (
    "id, agent_id, session_id, run_id, role, content, tokens, created_at, metadata,"
    " tool_call_id, tool_calls, name, is_error, principal, user_id, attempt"
)


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


class PostgresStore:
    """Every role of the store in one PostgreSQL database: history, runs, tool records,
    proofs, checkpoints, plugin state, leases (with their queues), cancel requests and
    counters, shared by every process (and host) that opens it."""

    multi_process: ClassVar[bool] = True  # every process on the server shares it

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
        self._limiter = trio.CapacityLimiter(pool_size)  # one thread per pooled connection
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

    async def _run(self, what: str, body: Callable[[Connection], T], *, write: bool) -> T:
        """``body`` in a worker thread on a pooled connection: in one transaction when
        ``write``, else as autocommitted statements."""
        pool = await self._ready(what)
        try:
            return await trio.to_thread.run_sync(
                self._attempts, pool, body, write, limiter=self._limiter
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
        self, pool: ConnectionPool[Connection], body: Callable[[Connection], T], write: bool
    ) -> T:
        conflicts = reconnects = 0
        while True:
            conn, pooled = self._checkout(pool)
            committing = broken = False
            try:
                if not write:
                    return body(conn)
                with conn.transaction():
                    result = body(conn)
                    committing = True  # leaving the block sends COMMIT
                return result
            except psycopg.Error as exc:
                if _retryable(exc) and conflicts < MAX_RETRIES:
                    conflicts += 1
                    time.sleep(random.uniform(0.005, 0.02) * conflicts)
                    continue
                if conn.broken and committing:
                    raise _CommitUnknown(str(exc)) from exc
                if not conn.broken or reconnects >= MAX_RECONNECTS:
                    raise
                # Nothing was committed (the server rolls back a transaction whose connection
                # is gone): again, on a connection that works.
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
        return await self._run(what, body, write=False)

    async def _write(self, what: str, body: Callable[[Connection], T]) -> T:
        return await self._run(what, body, write=True)

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

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        entries = await self._entries(
            "load history",
            "session_id = %s AND agent_id = %s AND principal IS NOT DISTINCT FROM %s"
            " AND user_id IS NOT DISTINCT FROM %s",
            (session_id, agent_id, principal, user_id),
        )
        return [e.message() for e in entries]

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        where: list[str] = ["session_id = %s"]
        args: list[str | None] = [session_id]
        if agent_id is not None:
            where.append("agent_id = %s")
            args.append(agent_id)
        if not isinstance(principal, EveryPrincipal):
            where.append("principal IS NOT DISTINCT FROM %s")  # None matches only None
            args.append(principal)
        return await self._entries("read history", " AND ".join(where), tuple(args))

    async def _entries(self, what: str, where: str, args: tuple[Any, ...]) -> list[HistoryEntry]:
        def read(conn: Connection) -> list[HistoryEntry]:
            rows = conn.execute(
                f"SELECT {_HISTORY_COLUMNS} FROM conversation_history WHERE {where} ORDER BY id",
                args,
            ).fetchall()
            # Reply metadata is kept once per attempt (docs/decisions/0045): an entry without
            # its own reads its attempt's, looked up once per run, not joined per entry.
            endings = _attempt_endings(
                conn, {r[3] for r in rows if r[8] is None and r[3] is not None}
            )
            return [
                HistoryEntry(
                    int(r[0]),
                    r[1] or "",
                    r[2] or "",
                    r[3],
                    r[4] or "",
                    r[5] or "",
                    r[6],
                    float(r[7]),
                    _loads(r[8] if r[8] is not None else endings.get((r[3], int(r[15])))),
                    r[9],
                    _loads(r[10]) or (),
                    r[11],
                    bool(r[12]),
                    r[13],
                    r[14],
                    int(r[15]),
                )
                for r in rows
            ]

        return await self._read(what, read)

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        lease_key = fence.key if fence is not None else run.lease_key

        def write(conn: Connection) -> RunRecord:
            _check_fence(conn, fence)
            _lock_run(conn, run.run_id)
            # Locked: a finish_run committing meanwhile cannot slip between the read of the
            # last attempt's ending and the reset below (it waits, or was read). And a start
            # of the same id in another process waits for this one's commit, then reads its
            # row: insert-or-fail with the run's identity, so exactly one owns a fresh id.
            previous = conn.execute(
                "SELECT attempt, metadata, agent_id, session_id, user_id, principal FROM runs"
                " WHERE run_id = %s FOR UPDATE",
                (run.run_id,),
            ).fetchone()
            if previous:
                differs = identity_differs(run, previous[2:])
                if differs:  # another request's run id: nothing is written (rolled back)
                    raise RunIdTaken(run.run_id, previous[5], differs)
            attempt = int(previous[0]) + 1 if previous else 1
            # A retry with the same run id is a new attempt: the last attempt's proof is kept
            # aside (never lost) and the new attempt gets its own.
            conn.execute(
                "INSERT INTO superseded_proofs (run_id, sha256, body, receipts, created_at,"
                f" superseded_at) SELECT run_id, sha256, body, receipts, created_at, {_NOW}"
                " FROM proofs WHERE run_id = %s",
                (run.run_id,),
            )
            conn.execute("DELETE FROM proofs WHERE run_id = %s", (run.run_id,))
            if previous:
                # The last attempt's ending is kept for its entries before runs.metadata is
                # reset; one that never ended crashed: its entries read interrupted. The
                # history is neither read nor written (docs/decisions/0045).
                number, ending = int(previous[0]), previous[1]
                conn.execute(
                    "INSERT INTO attempt_endings (run_id, attempt, metadata) VALUES (%s, %s, %s)"
                    " ON CONFLICT (run_id, attempt) DO NOTHING",
                    (
                        run.run_id,
                        number,
                        ending or _dumps({"status": "interrupted", "attempt": number}),
                    ),
                )
            # lease_token: the fence's, which the run's events of earlier attempts are
            # refused by (append_run_events)
            stored = conn.execute(
                "INSERT INTO runs (run_id, agent_id, session_id, user_id, principal, status,"
                " started_at, attempt, lease_key, lease_token) VALUES (%s, %s, %s, %s, %s,"
                " 'running', %s, %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET"
                " status = 'running', verification = NULL, incomplete_reason = NULL,"
                " metadata = NULL, finished_at = NULL, attempt = excluded.attempt,"
                " lease_key = excluded.lease_key, lease_token = excluded.lease_token"
                f" RETURNING {_RUN_COLUMNS}",
                (
                    run.run_id,
                    run.agent_id,
                    run.session_id,
                    run.user_id,
                    run.principal,
                    float(run.started_at),
                    attempt,
                    lease_key,
                    fence.token if fence is not None else None,
                ),
            ).fetchone()
            assert stored is not None  # RETURNING of an upsert always has its row
            return _run(stored)

        return await self._write("start run", write)

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        rows = [
            (
                run.agent_id,
                run.session_id,
                run.run_id,
                m.role,
                _text(m.content),
                m.tool_call_id,
                json.dumps(
                    [
                        {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                        for c in m.tool_calls
                    ],
                    default=str,
                )
                if m.tool_calls
                else None,
                m.name,
                m.is_error,
                run.principal,
                run.user_id,
                run.attempt,
            )
            for m in messages
        ]
        records = [
            (
                t.run_id,
                t.call_id,
                t.name,
                json.dumps(dict(t.arguments), default=str),
                _text(t.content),
                t.is_error,
                float(t.created_at),
            )
            for t in tools
        ]

        def write(conn: Connection) -> None:
            _check_fence(conn, fence)
            with conn.cursor() as cursor:
                if rows:
                    cursor.executemany(
                        "INSERT INTO conversation_history (agent_id, session_id, run_id, role,"
                        " content, created_at, tool_call_id, tool_calls, name, is_error,"
                        f" principal, user_id, attempt) VALUES (%s, %s, %s, %s, %s, {_NOW}, %s,"
                        " %s, %s, %s, %s, %s, %s)",
                        rows,
                    )
                if records:
                    cursor.executemany(
                        "INSERT INTO tool_records (run_id, call_id, name, arguments, content,"
                        " is_error, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                        " ON CONFLICT (run_id, call_id) DO NOTHING",
                        records,
                    )

        await self._write("record turn", write)

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        def read(conn: Connection) -> dict[str, ToolRecord]:
            return {r.call_id: r for r in _tool_records(conn, run_id)}

        return await self._read("load tool records", read)

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        body = _dumps(metadata)

        def write(conn: Connection) -> None:
            _check_fence(conn, fence)
            finished = conn.execute(
                "UPDATE runs SET status = %s, verification = %s, incomplete_reason = %s,"
                f" metadata = %s, finished_at = {_NOW} WHERE run_id = %s",
                (
                    metadata.get("status"),
                    metadata.get("verification"),
                    metadata.get("incomplete_reason"),
                    body,
                    run_id,
                ),
            )
            # One row, whatever the run's length: the entries of its current attempt read it
            # from there (joined on read), another run's and an earlier attempt's never do.
            if finished.rowcount == 0:  # no record of the run: its entries are attempt 1's
                conn.execute(
                    "INSERT INTO attempt_endings (run_id, attempt, metadata) VALUES (%s, 1, %s)"
                    " ON CONFLICT (run_id, attempt) DO UPDATE SET metadata = excluded.metadata",
                    (run_id, body),
                )

        await self._write("finish run", write)

    async def get_run(self, run_id: str) -> RunRecord | None:
        runs = await self._runs("WHERE r.run_id = %s", (run_id,))
        return runs[0] if runs else None

    async def list_runs(
        self,
        limit: int = 50,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[RunRecord]:
        clauses: list[str] = []
        args: list[Any] = []
        if agent_id is not None:
            clauses.append("r.agent_id = %s")
            args.append(agent_id)
        if not isinstance(principal, EveryPrincipal):
            clauses.append("r.principal IS NOT DISTINCT FROM %s")
            args.append(principal)
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        return await self._runs(
            f"{where} ORDER BY r.started_at DESC, r.run_id LIMIT %s", (*args, limit)
        )

    async def _runs(self, clause: str, args: tuple[Any, ...]) -> list[RunRecord]:
        def read(conn: Connection) -> list[RunRecord]:
            rows = conn.execute(
                f"SELECT {_columns('r', _RUN_COLUMNS)}, {_columns('l', _LEASE_COLUMNS)},"
                " extract(epoch FROM statement_timestamp())::float8"
                f" FROM runs AS r LEFT JOIN leases AS l ON l.key = r.lease_key {clause}",
                args,
            ).fetchall()
            width = _RUN_COLUMNS.count(",") + 1
            runs = []
            for row in rows:
                run = _run(row[:width])
                lease = _lease(run.lease_key or "", row[width:-1], float(row[-1]))
                runs.append(run_as_read(run, lease))
            return runs

        return await self._read("read runs", read)

    # -- proof store -------------------------------------------------------------------------------

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        def write(conn: Connection) -> ProofRecord:
            _check_fence(conn, fence)
            _lock_run(conn, run_id)  # a concurrent finalization waits here, then finds ours
            existing = _proof(conn, run_id)
            if existing is not None:
                return existing
            proof = make_proof(run_id, metadata, _tool_records(conn, run_id), assertions)
            inserted = conn.execute(
                "INSERT INTO proofs (run_id, sha256, body, receipts, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
                (run_id, proof.sha256, proof.body, proof.receipts, proof.created_at),
            ).fetchone()
            if inserted is None:  # stored meanwhile (cannot happen under the run lock)
                stored = _proof(conn, run_id)
                if stored is not None:
                    return stored
            return proof

        return await self._write("finalize proof", write)

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        return await self._read("read proof", lambda conn: _proof(conn, run_id))

    # -- checkpoint store --------------------------------------------------------------------------

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        def read(conn: Connection) -> list[Checkpoint]:
            rows = conn.execute(
                "SELECT step_id, status, agent_id, evidence, identity, updated_at"
                " FROM workflow_checkpoints WHERE run_id = %s ORDER BY seq",
                (run_id,),
            ).fetchall()
            return [
                Checkpoint(run_id, r[0], r[1], r[2] or "", _loads(r[3]), _loads(r[4]), float(r[5]))
                for r in rows
            ]

        return await self._read("load checkpoints", read)

    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        c = checkpoint
        row = (
            c.agent_id,
            c.run_id,
            c.step_id,
            c.status,
            json.dumps(c.evidence, default=str) if c.evidence is not None else None,
            json.dumps(c.identity, sort_keys=True, default=str) if c.identity is not None else None,
            float(c.updated_at),
        )

        def write(conn: Connection) -> None:
            _check_fence(conn, fence)
            # An upsert keeps the row (and its seq, the step order) of a step saved before.
            conn.execute(
                "INSERT INTO workflow_checkpoints (agent_id, run_id, step_id, status, evidence,"
                " identity, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id,"
                " step_id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status,"
                " evidence = excluded.evidence, identity = excluded.identity,"
                " updated_at = excluded.updated_at",
                row,
            )

        await self._write("save checkpoint", write)

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        def write(conn: Connection) -> int:
            if step_id is None:
                cursor = conn.execute(
                    "DELETE FROM workflow_checkpoints WHERE run_id = %s", (run_id,)
                )
            else:
                cursor = conn.execute(
                    "DELETE FROM workflow_checkpoints WHERE run_id = %s AND step_id = %s",
                    (run_id, step_id),
                )
            return max(cursor.rowcount, 0)

        return await self._write("discard checkpoints", write)

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        def read(conn: Connection) -> Mapping[str, Any] | None:
            row = conn.execute("SELECT value FROM plugin_state WHERE key = %s", (key,)).fetchone()
            return json.loads(row[0]) if row else None

        return await self._read("read state", read)

    async def save_state(
        self,
        key: str,
        value: Mapping[str, Any],
        fence: Lease | None = None,
        *,
        run_id: str | None = None,
    ) -> None:
        body = _dumps(value)

        def write(conn: Connection) -> None:
            _check_fence(conn, fence)
            conn.execute(
                "INSERT INTO plugin_state (key, value, updated_at, run_id)"
                f" VALUES (%s, %s, {_NOW}, %s) ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at,"
                " run_id = excluded.run_id",
                (key, body, run_id),
            )

        await self._write("save state", write)

    # -- lease store -------------------------------------------------------------------------------
    # Time is the server's: every expiry is judged by its clock, read after the row is locked.

    async def acquire_lease(
        self, key: str, owner: LeaseOwner, ttl: float, *, holder: str = "", queue: bool = False
    ) -> LeaseGrant:
        def write(conn: Connection) -> LeaseGrant:
            row = _locked_lease_row(conn, key)
            now = _now(conn)
            current = _lease(key, row, now)
            if current is not None and (current.owner.id, current.holder) == (owner.id, holder):
                # Ours already (expired or not, nobody took it): renewed, the same token.
                conn.execute(
                    "UPDATE leases SET renewed_at = %s, expires_at = %s WHERE key = %s",
                    (now, now + ttl, key),
                )
                _leave_queue(conn, key, owner.id, holder)
                renewed = attrs.evolve(current, renewed_at=now, expires_at=now + ttl, expired=False)
                return LeaseGrant(True, renewed)
            live = current is not None and not current.expired and not current.owner.provably_gone()
            ahead = _wait_in_queue(conn, key, owner.id, holder, now, ttl) if queue else 0
            if live:
                return LeaseGrant(False, current, ahead=ahead)
            if ahead:
                return LeaseGrant(False, None, ahead=ahead)  # free, but served in arrival order
            # Released leases included, and pruned ones (the high-water mark, read after the
            # row was locked: a prune that deleted it has committed): a token is never reused.
            token = max(int(row[0]), int(row[-1])) + 1
            conn.execute(
                "UPDATE leases SET token = %s, owner_id = %s, pid = %s, host = %s, boot = %s,"
                " holder = %s, acquired_at = %s, renewed_at = %s, expires_at = %s"
                " WHERE key = %s",
                (
                    token,
                    owner.id,
                    owner.pid,
                    owner.host,
                    owner.boot,
                    holder,
                    now,
                    now,
                    now + ttl,
                    key,
                ),
            )
            _leave_queue(conn, key, owner.id, holder)
            lease = Lease(key, owner, token, holder, now, now, now + ttl)
            return LeaseGrant(True, lease, took_over_from=current)

        return await self._write("acquire lease", write)

    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        if not leases:
            return []
        ordered = sorted(leases, key=lambda lease: lease.key)  # rows locked in one order

        def write(conn: Connection) -> list[Lease]:
            kept: dict[int, Lease] = {}
            for lease in ordered:
                row = conn.execute(
                    "UPDATE leases SET renewed_at = n.t, expires_at = n.t + %s"
                    f" FROM (SELECT {_NOW} AS t) AS n"
                    " WHERE key = %s AND token = %s AND owner_id = %s"
                    " RETURNING leases.renewed_at, leases.expires_at",
                    (float(ttl), lease.key, lease.token, lease.owner.id),
                ).fetchone()
                if row is not None:
                    renewed = attrs.evolve(
                        lease, renewed_at=float(row[0]), expires_at=float(row[1]), expired=False
                    )
                    kept[id(lease)] = renewed
            return [kept[id(lease)] for lease in leases if id(lease) in kept]

        return await self._write("renew leases", write)

    async def release_lease(self, lease: Lease) -> None:
        def write(conn: Connection) -> None:
            # The row stays, with its token, so that the next grant's token is greater.
            conn.execute(
                "UPDATE leases SET owner_id = NULL, pid = NULL, host = NULL, boot = NULL,"
                " holder = '', acquired_at = NULL, renewed_at = NULL, expires_at = NULL"
                " WHERE key = %s AND token = %s AND owner_id = %s",
                (lease.key, lease.token, lease.owner.id),
            )
            _leave_queue(conn, lease.key, lease.owner.id, lease.holder)

        await self._write("release lease", write)

    # -- retention -------------------------------------------------------------------------------

    async def prune(self, limits: RetentionLimits) -> Pruned:
        """Delete what ``limits`` no longer keeps, a batch per transaction (``_retention``);
        the clock is the server's."""
        total = Pruned()
        now = await self._read("prune", _now)
        for step in _retention.steps(limits, now):
            more = True
            while more:
                counts, more = await self._write("prune", step)
                total = _retention.add(total, counts)
        return total

    async def get_lease(self, key: str) -> Lease | None:
        def read(conn: Connection) -> Lease | None:
            row = conn.execute(
                f"SELECT {_LEASE_COLUMNS}, extract(epoch FROM statement_timestamp())::float8"
                " FROM leases WHERE key = %s",
                (key,),
            ).fetchone()
            return _lease(key, row[:-1], float(row[-1])) if row else None

        return await self._read("read lease", read)

    async def request_cancel(
        self, reason: str, *, run_id: str | None = None, lease_key: str | None = None
    ) -> CancelRequest:
        def write(conn: Connection) -> CancelRequest:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CANCEL_LOCK,))
            conn.execute(
                f"DELETE FROM cancel_requests WHERE created_at < {_NOW} - %s", (CANCEL_KEPT,)
            )
            row = conn.execute(
                "INSERT INTO cancel_requests (reason, run_id, lease_key, created_at)"
                f" VALUES (%s, %s, %s, {_NOW}) RETURNING id",
                (_text(reason), run_id, lease_key),
            ).fetchone()
            assert row is not None
            conn.execute("SELECT pg_notify(%s, %s)", (CANCELS, str(row[0])))  # sent on COMMIT
            return CancelRequest(int(row[0]), reason, run_id, lease_key)

        return await self._write("request cancel", write)

    async def cancel_requests(self, after: int) -> list[CancelRequest]:
        def read(conn: Connection) -> list[CancelRequest]:
            rows = conn.execute(
                "SELECT id, reason, run_id, lease_key FROM cancel_requests"
                f" WHERE id > %s AND created_at >= {_NOW} - %s ORDER BY id",
                (after, CANCEL_KEPT),
            ).fetchall()
            return [CancelRequest(int(r[0]), r[1], r[2], r[3]) for r in rows]

        return await self._read("read cancel requests", read)

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        await self._listener.start(self.start_soon)
        with trio.move_on_after(seconds):
            await self._listener.cancel_event().wait()

    # -- run events ----------------------------------------------------------------------------

    async def append_run_events(self, batches: Sequence[RunEventBatch], keep: int) -> list[str]:
        sweep = time.monotonic() - self._events_swept_at >= HOUSEKEEPING_EVERY

        def write(conn: Connection) -> list[str]:
            refused: list[str] = []
            if sweep:
                conn.execute(
                    f"DELETE FROM run_events WHERE created_at < {_NOW} - %s", (RUN_EVENTS_KEPT,)
                )
            with conn.cursor() as cursor:
                # One writer of a run's events at a time, and none while the run starts an
                # attempt (start_run takes the same lock): what a batch is judged by stays
                # as read until it commits. Taken in one order: two appends never deadlock.
                for run_id in sorted({b.run_id for b in batches}):
                    _lock_run(conn, run_id)
                for batch in batches:
                    newest = cursor.execute(
                        "SELECT principal, lease_token FROM run_events WHERE run_id = %s"
                        " ORDER BY id DESC LIMIT 1",
                        (batch.run_id,),
                    ).fetchone()
                    fence = batch.fence
                    started = None  # the run as stored: (principal, lease_key, lease_token)
                    if fence is not None:
                        started = cursor.execute(
                            "SELECT principal, lease_key, lease_token FROM runs WHERE run_id = %s",
                            (batch.run_id,),
                        ).fetchone()
                        if started is not None and started[1] not in (None, fence.key):
                            # another request's (its start of the stored id refused)
                            if batch.run_id not in refused:
                                refused.append(batch.run_id)
                            continue
                    # Another principal's events: never replaced, unless this is the stored
                    # run's own batch and those were a refused request's, written before the
                    # run started.
                    replacing = newest is not None and newest[0] != batch.principal
                    if replacing and not (
                        started is not None and fence is not None and started[0] == batch.principal
                    ):
                        continue
                    written = None if replacing or newest is None else newest[1]
                    if fence is not None and _stale_events(
                        conn, batch.run_id, fence, written, started
                    ):
                        if batch.run_id not in refused:
                            refused.append(batch.run_id)
                        continue  # an attempt a later one replaced: nothing of it is written
                    token = fence.token if fence is not None else None
                    if batch.restart or replacing:
                        cursor.execute("DELETE FROM run_events WHERE run_id = %s", (batch.run_id,))
                    cursor.executemany(
                        "INSERT INTO run_events (run_id, id, name, data, principal, created_at,"
                        f" lease_token) VALUES (%s, %s, %s, %s, %s, {_NOW}, %s)"
                        " ON CONFLICT (run_id, id) DO UPDATE SET name = excluded.name,"
                        " data = excluded.data, principal = excluded.principal,"
                        " created_at = excluded.created_at, lease_token = excluded.lease_token",
                        [
                            (
                                batch.run_id,
                                e.id,
                                e.name,
                                # the transport's own encoding when given (0050)
                                _text(
                                    e.json or json.dumps(dict(e.data), sort_keys=True, default=str)
                                ),
                                batch.principal,
                                token,
                            )
                            for e in batch.events
                        ],
                    )
                    if batch.events:
                        cursor.execute(
                            "DELETE FROM run_events WHERE run_id = %s AND id <= %s",
                            (batch.run_id, batch.events[-1].id - keep),
                        )
                written = dict.fromkeys(b.run_id for b in batches if b.run_id not in refused)
                for run_id in written:  # sent on COMMIT
                    cursor.execute("SELECT pg_notify(%s, %s)", (RUN_EVENTS, run_id))
            return refused

        refused = await self._write("append run events", write)
        if sweep:
            self._events_swept_at = time.monotonic()
        return refused

    async def run_events(self, run_id: str, after: int, limit: int = 1000) -> RunEvents | None:
        def read(conn: Connection) -> RunEvents | None:
            first = conn.execute(
                "SELECT id, principal FROM run_events WHERE run_id = %s ORDER BY id LIMIT 1",
                (run_id,),
            ).fetchone()
            if first is None:
                return None
            rows = conn.execute(
                "SELECT id, name, data FROM run_events WHERE run_id = %s AND id > %s"
                " ORDER BY id LIMIT %s",
                (run_id, after, limit),
            ).fetchall()
            # the text as stored comes along: a stream writes it without encoding it again
            events = [RunEvent(int(r[0]), r[1], json.loads(r[2]), r[2]) for r in rows]
            return RunEvents(run_id, first[1], int(first[0]), events)

        return await self._read("read run events", read)

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        def newest(conn: Connection) -> int:
            row = conn.execute(
                "SELECT max(id) FROM run_events WHERE run_id = %s", (run_id,)
            ).fetchone()
            return int(row[0]) if row and row[0] is not None else 0

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

        def write(conn: Connection) -> float | None:
            row = conn.execute(query, args).fetchone()
            return float(row[0]) if row else None  # None: refused, nothing added

        total = await self._write("spend", write)
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

    async def counter(self, key: str) -> float:
        def read(conn: Connection) -> float:
            row = conn.execute("SELECT total FROM counters WHERE key = %s", (key,)).fetchone()
            return float(row[0]) if row else 0.0

        return await self._read("read counter", read)

    # -- approval store --------------------------------------------------------------------------

    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        r = request
        row = (
            r.run_id,
            r.call_id,
            _text(r.tool),
            _text(json.dumps(dict(r.arguments), sort_keys=True, default=str)),
            r.agent_id,
            r.session_id,
            r.principal,
            r.user_id,
            _text(json.dumps(dict(r.request), sort_keys=True, default=str)),
            _text(json.dumps(list(r.reasons))),
            r.requested_at,
        )

        def write(conn: Connection) -> ApprovalRequest:
            _check_fence(conn, fence)
            conn.execute(
                "INSERT INTO tool_approvals (run_id, call_id, tool, arguments, agent_id,"
                " session_id, principal, user_id, request, reasons, requested_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (run_id, call_id) DO NOTHING",
                row,
            )
            return _approvals(conn, "run_id = %s AND call_id = %s", (r.run_id, r.call_id))[0]

        return await self._write("request approval", write)

    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        where, args = _approval_where(run_id, call_id, principal)

        def write(conn: Connection) -> ApprovalRequest | None:
            if not _approvals(conn, where, args):
                return None
            # The row lock orders two deciders: the second's UPDATE, re-checked after the
            # first commits, finds the call decided and changes nothing.
            cursor = conn.execute(
                "UPDATE tool_approvals SET approved = %s, approver = %s, decided_by = %s,"
                f" note = %s, decided_at = {_NOW} WHERE run_id = %s AND call_id = %s"
                " AND approved IS NULL",
                (
                    decision.approved,
                    _text(decision.approver),
                    decision.decided_by,
                    None if decision.note is None else _text(decision.note),
                    run_id,
                    call_id,
                ),
            )
            found = _approvals(conn, where, args)[0]
            if cursor.rowcount != 1:
                raise AlreadyDecided(found)
            return found

        return await self._write("decide approval", write)

    async def get_approval(
        self,
        run_id: str,
        call_id: str,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        where, args = _approval_where(run_id, call_id, principal)
        found = await self._read("read approval", lambda conn: _approvals(conn, where, args))
        return found[0] if found else None

    async def list_approvals(
        self,
        run_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
        *,
        pending: bool = False,
    ) -> list[ApprovalRequest]:
        clauses: list[str] = []
        args: list[Any] = []
        if run_id is not None:
            clauses.append("run_id = %s")
            args.append(run_id)
        if not isinstance(principal, EveryPrincipal):
            clauses.append("principal IS NOT DISTINCT FROM %s")
            args.append(principal)
        if pending:
            clauses.append("approved IS NULL")
        where = " AND ".join(clauses) or "TRUE"
        return await self._read("read approvals", lambda conn: _approvals(conn, where, tuple(args)))


_APPROVAL_COLUMNS = (
    "run_id, call_id, tool, arguments, agent_id, session_id, principal, user_id, request,"
    " reasons, requested_at, approved, approver, decided_by, note, decided_at"
)


def _approval_where(
    run_id: str, call_id: str, principal: str | EveryPrincipal | None
) -> tuple[str, tuple[Any, ...]]:
    if isinstance(principal, EveryPrincipal):
        return "run_id = %s AND call_id = %s", (run_id, call_id)
    return (
        "run_id = %s AND call_id = %s AND principal IS NOT DISTINCT FROM %s",
        (run_id, call_id, principal),
    )


def _approvals(conn: Connection, where: str, args: tuple[Any, ...]) -> list[ApprovalRequest]:
    rows = conn.execute(
        f"SELECT {_APPROVAL_COLUMNS} FROM tool_approvals WHERE {where} ORDER BY seq", args
    ).fetchall()
    return [
        ApprovalRequest(
            r[0],
            r[1],
            r[2],
            json.loads(r[3]),
            r[4],
            r[5],
            r[6],
            r[7],
            json.loads(r[8]),
            tuple(json.loads(r[9])),
            float(r[10]),
            None
            if r[11] is None
            else ApprovalDecision(bool(r[11]), r[12] or "", r[13], r[14], float(r[15] or 0.0)),
        )
        for r in rows
    ]


def _columns(table: str, columns: str) -> str:
    return ", ".join(f"{table}.{c.strip()}" for c in columns.split(","))


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def _dumps(value: Mapping[str, Any]) -> str:
    return json.dumps(dict(value), sort_keys=True, default=str)


def _text(text: str) -> str:
    """PostgreSQL's text cannot hold NUL characters: each is stored as U+FFFD."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _now(conn: Connection) -> float:
    row = conn.execute(f"SELECT {_NOW}").fetchone()
    assert row is not None
    return float(row[0])


def _lock_run(conn: Connection, run_id: str) -> None:
    """Serialize, until the transaction ends, the writes of one run id that read then write
    (its start and its proof)."""
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"soulacy:run:{run_id}",)
    )


def _run(r: Sequence[Any]) -> RunRecord:
    """A RunRecord as stored (``_RUN_COLUMNS``), before its lease is judged."""
    return RunRecord(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        _loads(r[8]),
        float(r[9]),
        float(r[10]) if r[10] is not None else None,
        int(r[11]),
        r[12],
    )


def _lease(key: str, r: Sequence[Any], now: float) -> Lease | None:
    """A Lease from ``_LEASE_COLUMNS`` (None when free: released, never granted, no row)."""
    if r[1] is None:
        return None
    owner = LeaseOwner(r[1], int(r[2] or 0), r[3] or "", r[4] or "")
    expires_at = float(r[8] or 0.0)
    return Lease(
        key,
        owner,
        int(r[0]),
        r[5] or "",
        float(r[6] or 0.0),
        float(r[7] or 0.0),
        expires_at,
        expires_at <= now,
    )


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
            f"SELECT {_LEASE_COLUMNS}, COALESCE((SELECT token FROM lease_high_water), 0)"
            " FROM leases WHERE key = %s FOR UPDATE",
            (key,),
        ).fetchone()
        if row is not None:
            return row


def _check_fence(conn: Connection, fence: Lease | None) -> None:
    """Inside the write's transaction: the lease's token still holds, else LeaseLost (the
    transaction rolls back, nothing is written). The row stays locked (FOR SHARE) until the
    write commits, so no takeover comes in between. An expired lease that nobody took over
    still holds."""
    if fence is None:
        return
    row = conn.execute(
        f"SELECT {_LEASE_COLUMNS} FROM leases WHERE key = %s FOR SHARE", (fence.key,)
    ).fetchone()
    if row is None or int(row[0]) != fence.token or row[1] != fence.owner.id:
        current = _lease(fence.key, row, _now(conn)) if row else None
        raise LeaseLost(fence.key, fence.token, current)


def _stale_events(
    conn: Connection,
    run_id: str,
    fence: Lease,
    written: int | None,
    started: Sequence[Any] | None,
) -> bool:
    """Inside the append's transaction, the run locked: whether a later attempt of the run has
    begun under a later grant of the fence's key. Its newest stored event was written
    (``written``), or it was started (``started``: the run's principal, lease_key,
    lease_token), under a greater token, or the run holds the key now under one (its next
    attempt took the lease over, and has not started yet; the lease row stays locked, FOR
    SHARE, until the append commits)."""
    if written is not None and int(written) > fence.token:
        return True
    if started is not None and started[1] == fence.key and int(started[2] or 0) > fence.token:
        return True
    held = conn.execute(
        "SELECT holder, token FROM leases WHERE key = %s FOR SHARE", (fence.key,)
    ).fetchone()
    return held is not None and held[0] == run_id and int(held[1]) > fence.token


def _wait_in_queue(
    conn: Connection, key: str, owner_id: str, holder: str, now: float, ttl: float
) -> int:
    """Join (or keep a place in) the queue of ``key``; returns how many live waiters are
    ahead. Waiters that stopped asking (expired) lose their place. Called with the lease row
    locked, so the queue of a key changes one transaction at a time."""
    conn.execute("DELETE FROM lease_waiters WHERE key = %s AND expires_at <= %s", (key, now))
    conn.execute(
        "INSERT INTO lease_waiters (key, owner_id, holder, expires_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (key, owner_id, holder) DO UPDATE SET expires_at = excluded.expires_at",
        (key, owner_id, holder, now + ttl),
    )
    row = conn.execute(
        "SELECT COUNT(*) FROM lease_waiters WHERE key = %s AND ticket < (SELECT ticket"
        " FROM lease_waiters WHERE key = %s AND owner_id = %s AND holder = %s)",
        (key, key, owner_id, holder),
    ).fetchone()
    return int(row[0]) if row else 0


def _leave_queue(conn: Connection, key: str, owner_id: str, holder: str) -> None:
    conn.execute(
        "DELETE FROM lease_waiters WHERE key = %s AND owner_id = %s AND holder = %s",
        (key, owner_id, holder),
    )


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


def _tool_records(conn: Connection, run_id: str) -> list[ToolRecord]:
    rows = conn.execute(
        "SELECT call_id, name, arguments, content, is_error, created_at"
        " FROM tool_records WHERE run_id = %s ORDER BY seq",
        (run_id,),
    ).fetchall()
    return [
        ToolRecord(run_id, r[0], r[1], json.loads(r[2]), r[3], bool(r[4]), float(r[5]))
        for r in rows
    ]


def _proof(conn: Connection, run_id: str) -> ProofRecord | None:
    row = conn.execute(
        "SELECT sha256, body, receipts, created_at FROM proofs WHERE run_id = %s", (run_id,)
    ).fetchone()
    return ProofRecord(run_id, row[0], row[1], int(row[2]), float(row[3])) if row else None


if TYPE_CHECKING:

    def _plays_every_role(store: PostgresStore) -> Store:
        return store
