"""Where the runs resumed by a decision run: a nursery of the kernel's services."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import trio

from soulacy.kernel import Event, Kernel, StashKey, redact_text
from soulacy.kernel.store import ApprovalRequest

from ._keeper import approvals_of

log = logging.getLogger("soulacy.approvals")

STARTED_WAIT = 2.0  # seconds a decision's answer waits for the run it resumed to start
ENDED = ("run.completed", "run.suspended")


class ResumeService:
    """Runs the same-id retries that decisions received by this process start (the process
    that waited for them is gone), apart from the request that decided: the answer to the
    decision does not wait for the run, whose events stream as any run's."""

    name = "approvals"

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._nursery: trio.Nursery | None = None

    @property
    def running(self) -> bool:
        return self._nursery is not None

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self.kernel.stopping.wait()
            finally:
                self._nursery = None
            nursery.cancel_scope.cancel()  # resumed runs end with the kernel, as any run does

    def resume(self, request: ApprovalRequest) -> bool:
        """Start the retry of ``request``'s run; False when the service is not running."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(self._resume, request)
        return True

    async def resume_started(self, request: ApprovalRequest, within: float = STARTED_WAIT) -> bool:
        """:meth:`resume`, returning once the retry has started (or ended, or ``within``
        seconds passed): a client told it resumed then reads the new attempt's events, never
        the stopped one's ``result`` (on another process too, once its first events are
        shared: the new attempt's replace them)."""
        begun = trio.Event()

        def seen(event: Event) -> None:
            if event.run_id == request.run_id:
                begun.set()

        stop = self.kernel.events.observe(seen, ("run.started", *ENDED))
        try:
            if not self.resume(request):
                return False
            with trio.move_on_after(within):
                await begun.wait()
        finally:
            stop()
        return True

    async def _resume(self, request: ApprovalRequest) -> None:
        try:
            await approvals_of(self.kernel).resume(request, stream=True)
        except Exception as exc:  # one run's failure must never take the service down
            log.error(
                "resuming run %s failed: %s",
                request.run_id,
                redact_text("".join(traceback.format_exception(exc)).rstrip()),
            )


_service_key = StashKey[ResumeService]("approvals resume service")


def resume_service(kernel: Kernel) -> ResumeService:
    service = kernel.stash.get(_service_key, None)
    if service is None:
        service = kernel.stash[_service_key] = ResumeService(kernel)
    return service
