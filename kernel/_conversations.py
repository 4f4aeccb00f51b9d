"""Serialization and cancellation of runs by conversation and by run id.

Turns of one conversation (agent + session) run one at a time across their whole model/tool
exchange, in arrival order; separate conversations run concurrently. Each run registers its own
cancel scope under its run id before it queues, so cancelling a conversation stops its active and
its queued runs, and finishing one run never removes another's tracking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

ConversationKey = tuple[str, str]  # (agent id, session id)


@attrs.define(eq=False)
class RunHandle:
    run_id: str
    conversation: ConversationKey
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    cancel_reason: str | None = None


class ConversationRegistry:
    def __init__(self) -> None:
        self._locks: dict[ConversationKey, trio.Lock] = {}
        self._by_conversation: dict[ConversationKey, list[RunHandle]] = defaultdict(list)
        self._by_run: dict[str, list[RunHandle]] = defaultdict(list)

    def register(self, run_id: str, conversation: ConversationKey) -> RunHandle:
        handle = RunHandle(run_id, conversation)
        self._by_conversation[conversation].append(handle)
        self._by_run[run_id].append(handle)
        self._locks.setdefault(conversation, trio.Lock())
        return handle

    def unregister(self, handle: RunHandle) -> None:
        """Forget ``handle`` alone; the lock goes once its conversation has no runs left."""
        same_run = self._by_run[handle.run_id]
        same_run.remove(handle)
        if not same_run:
            del self._by_run[handle.run_id]
        same_conversation = self._by_conversation[handle.conversation]
        same_conversation.remove(handle)
        if not same_conversation:
            del self._by_conversation[handle.conversation]
            del self._locks[handle.conversation]

    @asynccontextmanager
    async def turn(self, handle: RunHandle) -> AsyncIterator[None]:
        """Hold the conversation's turn (FIFO: trio.Lock is fair)."""
        async with self._locks[handle.conversation]:
            yield

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

    def statistics(self) -> dict[str, int]:
        return {"conversations": len(self._by_conversation), "runs": len(self._by_run)}
