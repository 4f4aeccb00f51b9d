"""The retention job: a service of ``soulacy serve`` that prunes the store on a schedule."""

from __future__ import annotations

import logging
from typing import Any

import trio

from soulacy.kernel import Duration, Kernel, SoulacyError
from soulacy.kernel.store import Pruned, RetentionLimits

from ._settings import RetentionConfig

log = logging.getLogger("soulacy.retention")
FIRST_SWEEP_AFTER = 1.0  # seconds after the service started


def _seconds(limit: Duration | None) -> float | None:
    """A limit in seconds; None (and zero) keeps for ever."""
    if limit is None or limit.is_zero:
        return None
    return float(limit.seconds)


def limits(config: RetentionConfig) -> RetentionLimits:
    """The store's limits of a ``retention:`` section."""
    return RetentionLimits(
        history=_seconds(config.history),
        run_events=_seconds(config.run_events),
        proofs=_seconds(config.proofs),
        runs=_seconds(config.runs),
        leases=_seconds(config.leases),
    )


async def prune(kernel: Kernel, config: RetentionConfig) -> Pruned | None:
    """Apply ``config`` to the kernel's store once; None when the store prunes nothing (it
    has no ``prune``: the in-memory store)."""
    store: Any = kernel.store()
    method = getattr(store, "prune", None)
    if method is None:
        return None
    pruned: Pruned = await method(limits(config))
    return pruned


class RetentionService:
    """Prunes the store a second after start and every ``retention.every``; a failed sweep is
    logged and tried again at the next one. Stops as soon as the kernel stops (a sweep's
    batches are their own transactions: what was deleted stays deleted)."""

    name = "retention"

    def __init__(self, kernel: Kernel, config: RetentionConfig) -> None:
        self.kernel = kernel
        self.config = config
        self.sweeps = 0  # sweeps done (tests and statistics)
        self.swept = trio.Event()  # set after each sweep, then replaced

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started(self)  # kernel.started["retention"]: the service itself
        async with trio.open_nursery() as nursery:
            if not self.config.every.is_zero:  # every: 0 turns the job off
                nursery.start_soon(self._sweeps)
            await self.kernel.stopping.wait()
            nursery.cancel_scope.cancel()

    async def _sweeps(self) -> None:
        every = max(1.0, float(self.config.every.seconds))
        # A second after start: the server's start and a stop right after it never wait on a
        # sweep's transaction (a command that only starts and stops prunes nothing).
        await trio.sleep(FIRST_SWEEP_AFTER)
        while True:
            await self.sweep()
            await trio.sleep(every)

    async def wait_sweeps(self, count: int) -> None:
        """Return once ``count`` sweeps are done (since start)."""
        while self.sweeps < count:
            await self.swept.wait()

    async def sweep(self) -> Pruned | None:
        try:
            pruned = await prune(self.kernel, self.config)
        except SoulacyError as exc:  # a store error (StorageError): the next sweep tries again
            log.warning("retention: pruning the store failed: %s", exc)
            pruned = None
        else:
            if pruned is not None and pruned.total():
                log.info("retention: deleted %s", _described(pruned))
        self.sweeps += 1
        self.swept.set()
        self.swept = trio.Event()
        return pruned


def _described(pruned: Pruned) -> str:
    kinds = {
        "runs": pruned.runs,
        "history entries": pruned.history,
        "run events": pruned.run_events,
        "proofs": pruned.proofs,
        "run states": pruned.state,
        "leases": pruned.leases,
    }
    return ", ".join(f"{count} {kind}" for kind, count in kinds.items() if count)
