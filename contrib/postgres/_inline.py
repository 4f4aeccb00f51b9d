"""One statement on the Trio thread: libpq's non-blocking calls, no worker thread.

psycopg's sync API blocks, so every other call of the store runs in a worker thread; the hop
there and back (a thread woken, then the Trio loop woken) costs about as much CPU as the
statement itself. A write that is one statement (a turn, a state row, a counter's spend) is
sent instead with psycopg's libpq wrapper (``psycopg.pq``), from the Trio thread, on an idle
pooled connection: the statement is sent, and the Trio loop waits for the socket, as psycopg's
own async connections do on asyncio. The statement is prepared once per connection (its
arguments typed by the statement: a cast where the context does not say; prepared again when
psycopg deallocated it, as it does at every rollback; not prepared on a connection whose
``prepare_threshold`` is None), and its arguments and answer are text.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from typing import Any

import psycopg
import trio
from psycopg import errors as pg
from psycopg import pq

Row = list[str | None]

_NUMBERED: dict[str, bytes] = {}  # a statement in psycopg's placeholders, in libpq's ($n)
_NAMES: dict[str, bytes] = {}  # a statement's prepared name, the same on every connection
_PLACEHOLDER = re.compile("%[s%]")


def numbered(sql: str) -> bytes:
    """``sql`` with psycopg's placeholders (``%s``, ``%%``) as libpq's (``$1``…, ``%``)."""
    found = _NUMBERED.get(sql)
    if found is None:
        count = 0

        def place(match: re.Match[str]) -> str:
            nonlocal count
            if match.group() == "%%":
                return "%"
            count += 1
            return f"${count}"

        found = _NUMBERED.setdefault(sql, _PLACEHOLDER.sub(place, sql).encode())
    return found


def encode(value: Any, codec: str = "utf-8") -> bytes | None:
    """An argument as PostgreSQL reads it in text, in the connection's encoding (``codec``):
    libpq ends a text argument at its first NUL, so one with a NUL is refused, as psycopg
    refuses it."""
    if value is None:
        return None
    if value is True:
        return b"t"
    if value is False:
        return b"f"
    if isinstance(value, float):
        return repr(value).encode()  # the shortest text that reads back as the same double
    text = value if isinstance(value, str) else str(value)
    if "\x00" in text:
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return text.encode(codec)


def _error(result: pq.abc.PGresult, codec: str = "utf-8") -> psycopg.Error:
    """The psycopg error of the server's answer (its class chosen by its SQLSTATE)."""
    state = result.error_field(pq.DiagnosticField.SQLSTATE)
    message = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY)
    text = (message or result.error_message or b"").decode(codec, errors="replace").strip()
    try:
        kind = pg.lookup(state.decode()) if state else psycopg.DatabaseError
    except KeyError:
        kind = psycopg.DatabaseError
    return kind(text)


async def _answers(pgconn: pq.abc.PGconn) -> list[pq.abc.PGresult]:
    """Send what libpq holds, then wait for the whole answer (until libpq has no more
    results), the Trio loop waiting on the socket."""
    fd = pgconn.socket
    while pgconn.flush():  # non-blocking: what the socket would not take yet
        await trio.lowlevel.wait_writable(fd)
    results: list[pq.abc.PGresult] = []
    while True:
        # What libpq holds already first (a server's goodbye read while sending, then the
        # end of the stream: the goodbye is the answer), then what the socket brings.
        while not pgconn.is_busy():
            result = pgconn.get_result()
            if result is None:
                return results
            results.append(result)
        await trio.lowlevel.wait_readable(fd)
        try:
            pgconn.consume_input()
        except psycopg.OperationalError:
            if any(r.status == pq.ExecStatus.FATAL_ERROR for r in results):
                return results  # the server's answer says why, then it closed the session
            raise


class _Session:
    """What a connection keeps for the statements sent from the Trio thread."""

    __slots__ = ("codec", "prepared")

    def __init__(self, codec: str) -> None:
        self.codec = codec  # the connection's client encoding, as a Python codec
        self.prepared: set[bytes] = set()


class Statements:
    """The statements prepared on each connection (forgotten with the connection)."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakKeyDictionary[psycopg.Connection[Any], _Session] = (
            weakref.WeakKeyDictionary()
        )

    async def execute(
        self, conn: psycopg.Connection[Any], sql: str, args: Sequence[Any]
    ) -> tuple[int, Row | None]:
        """Run ``sql`` (psycopg's placeholders) with ``args`` on ``conn``, idle: how many
        rows it wrote or returned, and its first row's values as text (None: no rows).
        Raises the psycopg error of a refusal, or of a connection that broke."""
        pgconn = conn.pgconn
        name = _NAMES.get(sql)
        if name is None:
            name = _NAMES.setdefault(sql, b"soulacy_%d" % len(_NAMES))
        session = self._sessions.get(conn)
        if session is None:
            session = self._sessions.setdefault(conn, _Session(conn.info.encoding))
        codec, done = session.codec, session.prepared
        params = [encode(value, codec) for value in args]
        if conn.prepare_threshold is None:  # psycopg prepares nothing here (a pooler's way)
            pgconn.send_query_params(numbered(sql), params)
            return _counted(await _answers(pgconn), codec)
        for attempt in (1, 2):
            if name not in done:
                pgconn.send_prepare(name, numbered(sql))
                for result in await _answers(pgconn):
                    # Already there: prepared by an earlier call whose answer was not seen
                    # here (what this session remembers is only a cache of the server's).
                    if result.status != pq.ExecStatus.COMMAND_OK and not _has(result, DUPLICATE):
                        raise _error(result, codec)
                done.add(name)
            pgconn.send_query_prepared(name, params)
            results = await _answers(pgconn)
            if attempt == 1 and any(_has(r, FORGOTTEN) for r in results):
                # psycopg deallocates prepared statements of a connection when one of its
                # transactions rolls back: nothing ran; prepared again (the others as met).
                done.discard(name)
                continue
            break
        return _counted(results, codec)


FORGOTTEN = b"26000"  # invalid_sql_statement_name: no prepared statement of that name
DUPLICATE = b"42P05"  # duplicate_prepared_statement


def _has(result: pq.abc.PGresult, sqlstate: bytes) -> bool:
    """Whether ``result`` is the server's error ``sqlstate``."""
    return (
        result.status == pq.ExecStatus.FATAL_ERROR
        and result.error_field(pq.DiagnosticField.SQLSTATE) == sqlstate
    )


def _counted(results: list[pq.abc.PGresult], codec: str) -> tuple[int, Row | None]:
    count, row = 0, None
    for result in results:
        status = result.status
        if status == pq.ExecStatus.TUPLES_OK:
            count = result.ntuples
            if count:
                row = [
                    None if value is None else value.decode(codec)
                    for value in (result.get_value(0, i) for i in range(result.nfields))
                ]
        elif status == pq.ExecStatus.COMMAND_OK:
            count = result.command_tuples or 0
        else:
            raise _error(result, codec)
    return count, row
