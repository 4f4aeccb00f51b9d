"""Holding leases: acquire (waiting in the store's queue), renew by heartbeat, stop on loss.

A lease is how a kernel owns something that another process sharing the store could also
want: a conversation's turn (held by the run that takes it), a workflow step, a schedule's
run. :meth:`Leases.hold` acquires one, renews it every ``leases.heartbeat`` while the body
runs, and cancels the body the moment a renewal finds it lost (taken over after it expired,
say after the process was stopped past its lease): every write made under it is fenced by
its token anyway, so a stale owner can neither write nor go on unaware. The design is in
docs/decisions/0029-leases-and-one-store.md.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio

from soulacy.kernel.engine import HeldLease
from soulacy.kernel.store import Lease, LeaseLost, StorageError, Store

from ._settings import LeaseSettings

if TYPE_CHECKING:
    from soulacy.kernel import Kernel

    from ._conversations import ConversationRegistry

log = logging.getLogger("soulacy.kernel.leases")

# How a worker starts its task: in the kernel's nursery while it is open, else in the nursery
# of the run it serves; True when started (decision 0062).
Start = Callable[..., bool]

POLL_FIRST = 0.005  # seconds: the first wait for a held lease, doubled up to POLL_MAX
POLL_MAX = 0.25


class _Pending:
    """A write the store refused, kept for the keeper, and what to tell if it is dropped."""

    __slots__ = ("dropped", "write")

    def __init__(
        self, write: Callable[[], Awaitable[None]], dropped: Callable[[bool], None]
    ) -> None:
        self.write, self.dropped = write, dropped


class Leases:
    """The kernel's leases (``kernel.leases``).

    One task renews every lease the kernel holds, in one store call per heartbeat
    (``renew_leases`` takes them all): a task and a sleep per lease cost every run its spawn
    and its cancellation, and 10,000 concurrent runs as many renewals a heartbeat. The task
    runs in the kernel's nursery while the kernel is open; a run of a kernel that is not open
    has a keeper of its own, in its own nursery (decision 0062). A store error is logged and
    retried at the next heartbeat; any other error ends the keeper and comes out of that
    nursery.
    """

    def __init__(self, kernel: Kernel, start: Start) -> None:
        self.kernel = kernel
        self._start = start
        self._held: dict[HeldLease, Callable[[], None] | None] = {}  # and what to call if lost
        # Held leases kept for a write the store refused (a run's outcome), and that write.
        self._pending: dict[HeldLease, _Pending] = {}
        self._keeping = False

    def settings(self) -> LeaseSettings:
        try:
            settings: LeaseSettings = self.kernel.config.section("leases")
        except KeyError:
            return LeaseSettings()
        return settings

    def poll_seconds(self) -> float:
        return self.settings().cancel_poll.seconds

    async def acquire(
        self,
        key: str,
        *,
        holder: str = "",
        queue: bool = False,
        wait: bool = True,
        on_lost: Callable[[], None] | None = None,
    ) -> HeldLease | None:
        """Acquire ``key`` and keep renewing it until :meth:`release`; with ``wait``, poll
        until granted (in the store's queue when ``queue``), else None when a live owner
        holds it. ``on_lost`` is called if a renewal finds the lease taken over."""
        store, ttl = self.kernel.store(), self.settings().ttl.seconds
        delay = POLL_FIRST
        while True:
            grant = await store.acquire_lease(
                key, self.kernel.owner, ttl, holder=holder, queue=queue
            )
            if grant.acquired:
                assert grant.lease is not None
                held = HeldLease(grant.lease, grant.took_over_from)
                self._held[held] = on_lost
                if not self._keeping:
                    self._keeping = self._start(self._keep, name="lease renewals")
                return held
            if not wait:
                return None
            await trio.sleep(delay)
            delay = min(delay * 2, POLL_MAX)

    async def release(self, held: HeldLease, *, shielded: bool = False) -> None:
        """Stop renewing and give the lease back (unless it was lost); never raises.

        ``shielded``: the caller is already shielded from cancellation (a run's finish is),
        so no cancel scope of its own is entered (one per run is a measurable cost)."""
        self._held.pop(held, None)
        if held.lost:
            return
        if shielded:
            await self._give_back(held)
            return
        with trio.CancelScope(shield=True):
            await self._give_back(held)

    def keep_until_written(
        self,
        held: HeldLease,
        write: Callable[[], Awaitable[None]],
        dropped: Callable[[bool], None],
    ) -> None:
        """Keep ``held`` (renewed as before) for ``write``, a write the store refused (a run's
        outcome: docs/running.md#after-a-crash): the keeper calls it after each heartbeat's
        renewal until it succeeds, then releases the lease. A lease found lost drops it
        (``write`` is fenced by the lease: a taken-over one must not write any more), and so
        does the last attempt at :meth:`aclose` when it fails: ``dropped(lost)`` says so."""
        if held.lost or held not in self._held:  # lost, or released already: nothing to do
            dropped(held.lost)
            return
        self._pending[held] = _Pending(write, dropped)

    def pending(self) -> int:
        """How many writes the store refused are kept for a retry (see keep_until_written)."""
        return len(self._pending)

    async def aclose(self) -> None:
        """One last attempt at each pending write, then give up: the lease is given back (its
        run then reads ``interrupted``, as a run whose process stopped). Never raises."""
        pending, self._pending = self._pending, {}
        with trio.CancelScope(shield=True):
            for held, kept in pending.items():
                if held.lost or held not in self._held:
                    kept.dropped(held.lost)
                    continue
                try:
                    await kept.write()
                except StorageError as exc:
                    log.warning(
                        "storing what the store refused under %r failed; giving up: %s",
                        held.lease.key,
                        exc,
                    )
                    kept.dropped(isinstance(exc, LeaseLost))
                await self.release(held, shielded=True)

    async def _give_back(self, held: HeldLease) -> None:
        try:
            await self.kernel.store().release_lease(held.lease)
        except StorageError as exc:  # it expires on its own
            log.warning("releasing the lease of %r failed: %s", held.lease.key, exc)

    @asynccontextmanager
    async def hold(
        self, key: str, *, holder: str = "", queue: bool = False
    ) -> AsyncIterator[HeldLease]:
        """Hold ``key`` for the block (waiting for it first). If a renewal finds the lease
        lost, the block is cancelled and :class:`LeaseLost` raised from it."""
        with trio.CancelScope() as scope:
            acquired = await self.acquire(key, holder=holder, queue=queue, on_lost=scope.cancel)
            assert acquired is not None
            held = acquired
            try:
                yield held
            finally:
                await self.release(held)
        if held.lost:
            raise held.error()

    async def _keep(self) -> None:
        """Renew every held lease each heartbeat, while any is held; stop the holders of the
        ones a renewal finds taken over; then retry the writes the store refused
        (``keep_until_written``), each under its lease just renewed. After the renewal, not
        beside it: a fenced write locks its lease's row, and a renewal waiting on that lock
        would let every lease of the batch lapse."""
        settings = self.settings()
        store = self.kernel.store()
        try:
            while self._held:
                await trio.sleep(settings.heartbeat.seconds)
                held = list(self._held)
                if not held:
                    break
                try:
                    renewed = await store.renew_leases(
                        [h.lease for h in held], settings.ttl.seconds
                    )
                except StorageError as exc:
                    # Unreachable store: the leases may still be ours (a takeover, if any,
                    # shows at the next renewal or write); keep trying.
                    log.warning("renewing %d leases failed: %s", len(held), exc)
                    continue
                kept = {(lease.key, lease.token): lease for lease in renewed}
                for one in held:
                    lease = kept.get((one.lease.key, one.lease.token))
                    if lease is not None:
                        one.lease = lease
                    elif one in self._held:  # not released while the renewal was written
                        await self._lost(store, one, self._held.pop(one))
                if self._pending:
                    await self._write_pending()
        finally:  # the next lease acquired starts it again; what is pending stays for aclose
            self._keeping = False

    async def _write_pending(self) -> None:
        """Retry the writes the store refused, each under its lease (renewed meanwhile);
        release the lease of each that succeeds, drop those whose lease was lost."""
        for held, kept in list(self._pending.items()):
            if held.lost or held not in self._held:
                self._pending.pop(held, None)
                kept.dropped(held.lost)
                continue
            try:
                await kept.write()
            except LeaseLost as exc:  # taken over meanwhile: fenced, nothing written
                self._pending.pop(held, None)
                if self._held.pop(held, None) is not None:
                    held.lost, held.lost_to = True, exc.current
                kept.dropped(True)
                log.warning("the lease of %r was taken over; dropping its unstored write", exc.key)
            except StorageError as exc:  # still refused: again at the next heartbeat
                log.warning(
                    "storing what the store refused under %r failed: %s", held.lease.key, exc
                )
            else:
                self._pending.pop(held, None)
                await self.release(held)

    async def _lost(
        self, store: Store, held: HeldLease, on_lost: Callable[[], None] | None
    ) -> None:
        kept = self._pending.pop(held, None)  # a write kept for it is fenced out: dropped
        held.lost = True
        if kept is not None:
            kept.dropped(True)
        held.lost_to = await _current(store, held.lease.key)
        log.warning(
            "the lease of %r (token %d) was taken over; stopping what it held",
            held.lease.key,
            held.lease.token,
        )
        if on_lost is not None:
            on_lost()


async def _current(store: Store, key: str) -> Lease | None:
    try:
        return await store.get_lease(key)
    except Exception:
        return None


class CancelWatcher:
    """Brings cancellations asked from other processes (``Store.request_cancel``) to this
    kernel's runs: one read every ``leases.cancel_poll`` while runs are reserved, or as soon as
    the store announces a request; none when the store is single-process or nothing runs."""

    def __init__(
        self, kernel: Kernel, conversations: ConversationRegistry, leases: Leases, start: Start
    ) -> None:
        self.kernel = kernel
        self._start = start
        self.conversations = conversations
        self.leases = leases
        self.running = False

    def ensure(self) -> None:
        if self.running or not self.kernel.store().multi_process:
            return
        self.running = self._start(self._watch, name="cancel watcher")

    async def _watch(self) -> None:
        kernel = self.kernel
        store, poll = kernel.store(), self.leases.settings().cancel_poll.seconds
        cursor: int | None = None  # requests older than the first read predate these runs
        try:
            while self.conversations.statistics()["runs"]:
                requests = await store.cancel_requests(-1 if cursor is None else cursor)
                for request in requests if cursor is not None else ():
                    if request.run_id is not None:
                        self.conversations.cancel_run(request.run_id, request.reason)
                    if request.lease_key is not None:
                        self.conversations.cancel_lease(request.lease_key, request.reason)
                cursor = max([cursor or -1, *(request.id for request in requests)])
                # A store that announces requests (PostgreSQL's NOTIFY) wakes this at once.
                await store.wait_cancel_requests(cursor, poll)
        except StorageError as exc:  # the next run starts it again
            log.warning("watching for cancellations failed: %s", exc)
        finally:
            self.running = False
