"""``check_service_stops(kernel, service)``: a service ends on its own when the kernel stops.

The :class:`~soulacy.kernel.Service` contract: ``serve`` returns once ``kernel.stopping`` is set.
A service that waits to be cancelled instead (``trio.sleep_forever()``) costs every
``open_kernel`` exit, every test and every stop of ``soulacy serve`` the whole grace period.
"""

from __future__ import annotations

from typing import Any

import trio

from soulacy.kernel import DEFAULT_GRACE_PERIOD, Kernel, Service

# How long serve() may take to return after kernel.stopping is set: the grace period after which
# open_kernel would cancel it. A bound for "waits to be cancelled", not a speed test: a service
# that stops child processes (MCP servers) waits for them to exit, which a loaded machine slows.
STOP_WITHIN = DEFAULT_GRACE_PERIOD
START_WITHIN = 30.0  # seconds a service may take to become ready (an MCP server's process …)


async def check_service_stops(
    kernel: Kernel, service: Service, *, within: float = STOP_WITHIN
) -> Any:
    """Start ``service`` as :func:`~soulacy.kernel.open_kernel` does, set ``kernel.stopping``,
    and fail unless ``serve`` returns by itself within ``within`` seconds (by default the
    kernel's grace period, after which ``open_kernel`` would cancel it).

    ``kernel`` must not be stopping yet (use a fresh one per service). Returns what the service
    handed to ``task_status.started()``. A failure raises AssertionError naming the service,
    what was expected and what happened; a service still running then is cancelled.
    """
    name = getattr(service, "name", type(service).__name__)
    if kernel.stopping.is_set():
        raise ValueError("check_service_stops needs a kernel that is not stopping yet")
    returned = trio.Event()
    async with trio.open_nursery() as nursery:
        with trio.move_on_after(START_WITHIN) as starting:
            started = await nursery.start(_serve, service, returned)
        if starting.cancelled_caught:
            nursery.cancel_scope.cancel()
            raise AssertionError(
                f"service {name}: its start: expected task_status.started() within"
                f" {START_WITHIN:g}s, got nothing"
            )
        kernel.stopping.set()
        nursery.cancel_scope.deadline = trio.current_time() + within
    if not returned.is_set():
        raise AssertionError(
            f"service {name}: after kernel.stopping was set: expected serve() to return within"
            f" {within:g}s, got it still running (it was cancelled); a service awaits"
            " kernel.stopping, never trio.sleep_forever()"
        )
    return started


async def _serve(
    service: Service, returned: trio.Event, *, task_status: trio.TaskStatus[Any]
) -> None:
    await service.serve(task_status=task_status)
    returned.set()  # by itself: a cancelled serve() raises Cancelled and never gets here
