"""The kernel's event stream: one ordered sequence of typed events per kernel.

Observers are plugins (the ``soulacy_event`` hook, awaited when async) and callbacks added with
:meth:`EventStream.observe`, which may name the event types they read; subscribers are tasks that
read a bounded Trio memory channel. A subscriber that falls behind by more than its buffer is
dropped and told so, rather than letting one slow reader grow memory without bound.

Emitters on a hot path ask :meth:`EventStream.wants` first and build nothing that nobody reads
(docs/decisions/0042-hot-hooks-and-events-nobody-reads.md).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

if TYPE_CHECKING:
    from ._kernel import Kernel

Observer = Callable[["Event"], "Awaitable[None] | None"]


@attrs.frozen
class Event:
    """One event: ``type`` such as ``"run.started"``, the run it belongs to and its data."""

    type: str
    data: Mapping[str, Any] = attrs.field(factory=dict)
    run_id: str | None = None
    seq: int = 0  # assigned by the stream, strictly increasing per kernel


class EventStream:
    """Emits events to plugin observers, callback observers and subscribers, in that order."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._seq = itertools.count(1)
        self._subscribers: list[trio.MemorySendChannel[Event]] = []
        self._pm = kernel.pm
        self._heard = (-1, False)  # (the manager's generation, whether soulacy_event is heard)
        self._every: list[Observer] = []  # callbacks for every type
        self._by_type: dict[str, list[Observer]] = {}

    def subscribe(self, buffer: int | float = 1024) -> trio.MemoryReceiveChannel[Event]:
        """A channel that receives every event emitted from now on.

        ``buffer`` bounds memory; ``math.inf`` lifts the bound (for tests and trusted readers).
        When the buffer overflows the channel is closed, and reading it raises
        ``trio.EndOfChannel`` after what was buffered.
        """
        send, receive = trio.open_memory_channel[Event](buffer)
        self._subscribers.append(send)
        return receive

    def observe(self, observer: Observer, types: Iterable[str] | None = None) -> Callable[[], None]:
        """Call ``observer`` with each event of ``types`` (None: of every type) from now on,
        after the ``soulacy_event`` plugins, awaiting it when it returns an awaitable. Returns
        the function that stops it. A plugin that reads a few types, or reads only while it
        serves, observes this way, so that a turn builds no event that nobody reads."""
        lists = [self._every] if types is None else [self._by_type.setdefault(t, []) for t in types]
        for found in lists:
            found.append(observer)

        def stop() -> None:
            for found in lists:
                if observer in found:
                    found.remove(observer)
            for type in [t for t, found in self._by_type.items() if not found]:
                del self._by_type[type]

        return stop

    def wants(self, type: str) -> bool:
        """Whether an event of ``type`` emitted now would reach anyone."""
        return bool(self._subscribers or self._every or type in self._by_type or self._hook_heard())

    def _hook_heard(self) -> bool:
        """Whether ``soulacy_event`` reaches anyone, asked again only after a registration."""
        generation, heard = self._heard
        if generation != self._pm.generation:
            heard = self._pm.heard("soulacy_event")
            self._heard = (self._pm.generation, heard)
        return heard

    async def emit(
        self, type: str, data: Mapping[str, Any] | None = None, run_id: str | None = None
    ) -> Event:
        event = Event(type, dict(data) if data else {}, run_id, next(self._seq))
        every, typed = self._every, self._by_type.get(type)
        # a hook nobody hears answers nothing: not called (a text delta's hot path, 0050)
        results: list[Any] = (
            self._kernel.hook.soulacy_event(kernel=self._kernel, event=event)
            if self._hook_heard()
            else []
        )
        if every or typed:
            # a copy: an observer may stop itself, or another, while it is called; every
            # observer is called before any answer is awaited, as the plugins' answers are
            for observer in (*every, *typed) if typed else tuple(every):
                results.append(observer(event))
        for result in results:
            if result is not None and inspect.isawaitable(result):
                await result
        if not self._subscribers:
            return event
        for send in list(self._subscribers):
            try:
                send.send_nowait(event)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                send.close()  # a lagging or departed reader is dropped, never waited for
                self._subscribers.remove(send)
        return event

    def statistics(self) -> dict[str, int]:
        return {"subscribers": len(self._subscribers)}
