"""The background work of runs — the lease keeper, the cancel watcher, the deadline watchdog —
in a nursery: the kernel's while it is open, else the run's own (decision 0062)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

import trio

from ._deadlines import Watchdog
from ._leases import CancelWatcher, Leases

if TYPE_CHECKING:
    from soulacy.kernel import Kernel

    from ._conversations import ConversationRegistry


class Workers:
    """One set of background workers, started on first need through ``start``."""

    def __init__(
        self,
        kernel: Kernel,
        conversations: ConversationRegistry,
        start: Callable[..., bool],
    ) -> None:
        self.kernel = kernel
        self.leases = Leases(kernel, start)
        self.watchdog = Watchdog(start)  # the runs' step, model and tool deadlines
        self.cancel_watcher = CancelWatcher(kernel, conversations, self.leases, start)


# The private workers of the run the current task belongs to (a run of a kernel that is not
# open): what the run's own code (a workflow step's lease) finds as ``kernel.leases``.
CURRENT: ContextVar[Workers | None] = ContextVar("soulacy.engine.workers", default=None)


def starter(nursery: trio.Nursery) -> Callable[..., bool]:
    """``start`` for workers in ``nursery`` (a run's own)."""

    def start(async_fn: Callable[[], Awaitable[object]], *, name: str | None = None) -> bool:
        nursery.start_soon(async_fn, name=name)
        return True

    return start
