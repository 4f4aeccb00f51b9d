"""LISTEN/NOTIFY for the PostgreSQL store: a run's stream events and cancellation requests
announced to every process on the server the moment they commit.

One connection per store LISTENs, opened by the first caller that waits, in a worker thread
that blocks in ``Connection.notifies()`` (psycopg's sync API, as everywhere in this store) and
hands each notification to the Trio thread. Waiters never depend on it: while it is not
listening (not yet connected, the connection dropped, the server down) they poll instead, and
with it they still look again every few seconds, so a lost notification delays, never loses.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import trio

from soulacy.plugins.sqlkit import CANCELS, RUN_EVENTS

log = logging.getLogger("soulacy.contrib.postgres")

# The channels (sqlkit's): RUN_EVENTS, payload the run id; CANCELS, payload the request's id.
RECONNECT_AFTER = 1.0  # seconds between two attempts to (re)open the listening connection
STARTUP_WAIT = 5.0  # seconds a first waiter waits for LISTEN to take effect before polling
CLOSE_CHECK = 1.0  # seconds the listening thread blocks before looking whether to stop

Connection = psycopg.Connection[tuple[Any, ...]]


class Listener:
    """Wakes Trio tasks waiting for a run's events or for cancellation requests."""

    def __init__(self, connect: Callable[[], Connection]) -> None:
        self._connect = connect
        self._runs: dict[str, trio.Event] = {}  # run id -> the event its waiters share
        self._cancels = trio.Event()
        self._listening = trio.Event()  # set while LISTEN is in effect
        self._started = False
        self._closing = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._warned = False  # one warning per outage

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    async def start(self, start_soon: Callable[..., bool]) -> None:
        """Start listening (once, in the kernel's nursery: ``start_soon``); return when LISTEN
        took effect, or after a short wait. With no nursery to listen in (the kernel is not
        open) it returns at once: waiters poll."""
        if not self._started:
            self._token = trio.lowlevel.current_trio_token()
            self._started = start_soon(self._listen, name="postgres listener")
            if not self._started:
                return
        with trio.move_on_after(STARTUP_WAIT):
            await self._listening.wait()

    def run_event(self, run_id: str) -> trio.Event:
        """The event set at the next announcement of ``run_id``'s events (take it before
        looking at the table, so an announcement between the look and the wait is seen)."""
        event = self._runs.get(run_id)
        if event is None:
            event = self._runs[run_id] = trio.Event()
        return event

    def cancel_event(self) -> trio.Event:
        return self._cancels

    def forget(self, run_id: str, event: trio.Event) -> None:
        """A waiter left: drop the run's entry if nobody can be waiting on a newer one."""
        if self._runs.get(run_id) is event and not event.statistics().tasks_waiting:
            del self._runs[run_id]

    def close(self) -> None:
        self._closing.set()

    # -- the listening side ------------------------------------------------------------------

    def _wake(self, channel: str, payload: str) -> None:
        if channel == RUN_EVENTS:
            event = self._runs.pop(payload, None)
            if event is not None:
                event.set()
        elif channel == CANCELS:
            self._cancels.set()
            self._cancels = trio.Event()

    def _lost(self) -> None:
        self._listening = trio.Event()
        for event in self._runs.values():  # waiters look again, then poll
            event.set()
        self._runs.clear()
        self._cancels.set()
        self._cancels = trio.Event()

    async def _listen(self) -> None:
        try:
            await self._listen_until_closed()
        finally:  # cancelled with the kernel's nursery: the next open kernel starts it again
            self._started = False
            if self._listening.is_set():
                self._lost()

    async def _listen_until_closed(self) -> None:
        while not self._closing.is_set():
            try:
                await trio.to_thread.run_sync(self._receive, abandon_on_cancel=True)
            except (psycopg.Error, OSError) as exc:  # lost: waiters poll until it is back
                if not self._closing.is_set() and not self._warned:
                    self._warned = True
                    log.warning(
                        "PostgreSQL LISTEN connection lost (%s): waiters poll until it is back",
                        type(exc).__name__,
                    )
            if self._listening.is_set():
                self._lost()
            await trio.sleep(RECONNECT_AFTER)

    def _receive(self) -> None:
        """In a worker thread: LISTEN, then hand every notification to Trio until closed."""
        assert self._token is not None
        token = self._token
        with self._connect() as conn:
            conn.execute(f"LISTEN {RUN_EVENTS}")
            conn.execute(f"LISTEN {CANCELS}")
            trio.from_thread.run_sync(self._listening.set, trio_token=token)
            self._warned = False
            while not self._closing.is_set():
                for note in conn.notifies(timeout=CLOSE_CHECK):
                    try:
                        trio.from_thread.run_sync(
                            self._wake, note.channel, note.payload, trio_token=token
                        )
                    except trio.RunFinishedError:
                        return
                    if self._closing.is_set():
                        return
