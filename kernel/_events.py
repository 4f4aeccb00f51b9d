"""The kernel's event stream: one ordered sequence of typed events per kernel.

Observers are plugins (the ``soulacy_event`` hook, awaited when async); subscribers are tasks that
read a bounded Trio memory channel. A subscriber that falls behind by more than its buffer is
dropped and told so, rather than letting one slow reader grow memory without bound.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from ._kernel import Kernel


@attrs.frozen
class Event:
    """One event: ``type`` such as ``"run.started"``, the run it belongs to and its data."""

    type: str
    data: Mapping[str, Any] = attrs.field(factory=dict)
    run_id: str | None = None
    seq: int = 0  # assigned by the stream, strictly increasing per kernel


class EventStream:
    """Emits events to plugin observers and to subscribers, in order."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._seq = itertools.count(1)
        self._subscribers: list[trio.MemorySendChannel[Event]] = []

    def subscribe(self, buffer: int | float = 1024) -> trio.MemoryReceiveChannel[Event]:
        """A channel that receives every event emitted from now on.

        ``buffer`` bounds memory; ``math.inf`` lifts the bound (for tests and trusted readers).
        When the buffer overflows the channel is closed, and reading it raises
        ``trio.EndOfChannel`` after what was buffered.
        """
        send, receive = trio.open_memory_channel[Event](buffer)
        self._subscribers.append(send)
        return receive

    async def emit(
        self, type: str, data: Mapping[str, Any] | None = None, run_id: str | None = None
    ) -> Event:
        event = Event(type, dict(data or {}), run_id, next(self._seq))
        for result in self._kernel.hook.soulacy_event(kernel=self._kernel, event=event):
            if inspect.isawaitable(result):
                await result
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                send.close()  # a lagging or departed reader is dropped, never waited for
                self._subscribers.remove(send)
        return event

    def statistics(self) -> dict[str, int]:
        return {"subscribers": len(self._subscribers)}
