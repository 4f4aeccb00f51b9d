"""Reservation, serialization and cancellation of runs by conversation and by run id.

A conversation is an agent's session *as seen by one principal and user*: the same session id
used by another principal is another conversation, with its own history and its own turn.

Turns of one conversation run one at a time across their whole model/tool exchange, in arrival
order; separate conversations run concurrently. A run id is reserved before anything of its run
happens (synchronously: no checkpoint separates the check from the reservation), so a live run's
id is never taken by another request; a retry of the *same* request (same conversation, same
input) queues behind it instead, as the seed asks of concurrent retries in one process. Each
run registers its own cancel scope under its run id before it queues, so cancelling a
conversation stops its active and its queued runs, and finishing one run never removes
another's tracking.
"""

from __future__ import annotations

from collections import defaultdict

import attrs
import trio

from soulacy.kernel import CapacityError, RunHandle, RunIdInUse, Settings
from soulacy.kernel.store import ConversationKey


@attrs.frozen
class Capacity:
    """How many runs may be reserved at once; 0 means no cap."""

    overall: int = 0
    per_principal: int = 0


class ConversationRegistry:
    def __init__(self) -> None:
        self._locks: dict[ConversationKey, trio.Lock] = {}
        self._by_conversation: dict[ConversationKey, list[RunHandle]] = defaultdict(list)
        self._by_run: dict[str, list[RunHandle]] = {}
        self._by_principal: dict[str | None, int] = defaultdict(int)
        self._active = 0  # reserved runs, queued ones included: each counts until it ends

    def reserve(
        self,
        run_id: str,
        conversation: ConversationKey,
        request: str = "",
        capacity: Capacity = Capacity(),
        *,
        exclusive: bool = False,
    ) -> RunHandle:
        """Reserve ``run_id`` for one run of ``conversation``, or raise.

        :class:`RunIdInUse` when a live run of another request holds the id (a retry of the
        same request queues behind it, unless ``exclusive``), :class:`CapacityError` when a cap
        is reached. Synchronous on purpose: the check and the reservation are one step.
        """
        holders = self._by_run.get(run_id)
        same = holders and (holders[0].conversation, holders[0].request) == (conversation, request)
        if holders and (exclusive or not same):
            raise RunIdInUse(run_id, holders[0].conversation.principal)
        if capacity.overall and self._active >= capacity.overall:
            raise CapacityError("overall", capacity.overall)
        principal = conversation.principal
        if capacity.per_principal and self._by_principal[principal] >= capacity.per_principal:
            raise CapacityError("principal", capacity.per_principal)
        handle = RunHandle(run_id, conversation, request)
        if holders is None:
            self._by_run[run_id] = [handle]
        else:
            holders.append(handle)
        self._active += 1
        self._by_principal[principal] += 1
        self._by_conversation[conversation].append(handle)
        if conversation not in self._locks:  # a lock is made for the first run only
            self._locks[conversation] = trio.Lock()
        return handle

    def release(self, handle: RunHandle) -> None:
        """Forget ``handle`` alone (twice is harmless); the lock goes with the last run."""
        if handle.released:
            return
        handle.released = True
        same_run = self._by_run[handle.run_id]
        same_run.remove(handle)
        if not same_run:
            del self._by_run[handle.run_id]
        self._active -= 1
        principal = handle.conversation.principal
        self._by_principal[principal] -= 1
        if not self._by_principal[principal]:
            del self._by_principal[principal]
        same_conversation = self._by_conversation[handle.conversation]
        same_conversation.remove(handle)
        if not same_conversation:
            del self._by_conversation[handle.conversation]
            del self._locks[handle.conversation]

    def holder(self, run_id: str) -> RunHandle | None:
        holders = self._by_run.get(run_id)
        return holders[0] if holders else None

    def turn(self, handle: RunHandle) -> trio.Lock:
        """The conversation's turn, to hold with ``async with`` (FIFO: trio.Lock is fair).
        The lock itself, not a generator around it: one fewer object and frame per run."""
        return self._locks[handle.conversation]

    def cancel_run(self, run_id: str, reason: str = "cancelled") -> int:
        handles = list(self._by_run.get(run_id, ()))
        for handle in handles:
            handle.cancel_reason = reason
            handle.scope.cancel()
        return len(handles)

    def cancel_conversation(self, conversation: ConversationKey, reason: str = "cancelled") -> int:
        handles = list(self._by_conversation.get(conversation, ()))
        for handle in handles:
            handle.cancel_reason = reason
            handle.scope.cancel()
        return len(handles)

    def cancel_lease(self, lease_key: str, reason: str = "cancelled") -> int:
        """Cancel the runs of the conversation whose lease key is ``lease_key``."""
        for conversation in list(self._by_conversation):
            if conversation.lease_key() == lease_key:
                return self.cancel_conversation(conversation, reason)
        return 0

    def statistics(self) -> dict[str, int]:
        return {"conversations": len(self._by_conversation), "runs": len(self._by_run)}


def read_capacity(config: Settings) -> Capacity:
    """The reservation caps of a configuration (``runtime.max_concurrent_sessions*``, the
    ``policy`` plugin's keys): none when no plugin declares them."""
    try:
        overall = config.get("runtime.max_concurrent_sessions")
        per_principal = config.get("runtime.max_concurrent_sessions_per_principal")
    except KeyError:
        return Capacity()
    return Capacity(int(overall or 0), int(per_principal or 0))
