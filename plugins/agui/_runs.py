"""The AG-UI runs of one kernel: each run's numbered events, live and after it ended.

A run started through AG-UI gets a log here; the kernel events of that run (observed only for
the types this plugin translates, and only in kernels that serve it) are translated into it as
they come, and its end is written from the :class:`RunResult`. A finished log stays in memory
(the last :data:`FINISHED_KEPT`) and is written to the store's run events under
``agui:RUN_ID``, from where a client that resumes after it left memory (or on another process
of a shared store) still gets it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import trio

from soulacy.kernel import Event, Kernel, RunHandle, RunResult
from soulacy.kernel.store import RunEvent, RunEventBatch, StorageError
from soulacy.plugins.http import StreamWriter

from ._translate import AguiEvent, Translator

logger = logging.getLogger("soulacy.agui")

TRANSLATED = ("text.delta", "tool.call", "tool.result")
FINISHED_KEPT = 50  # finished logs kept in memory; older ones are read from the store
STORE_PREFIX = "agui:"  # the store's run events of a run's AG-UI log: apart from the HTTP API's
EVENT_NAME = "agui"  # the name of every stored event (the AG-UI type is in its data)
STORE_WAIT = 10.0  # seconds a finished run's events may take to be stored, the kernel stopping


def frame(event_id: int, event: AguiEvent) -> bytes:
    """One SSE event: its id (for ``Last-Event-ID``), and one line of JSON."""
    data = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
    return f"id: {event_id}\ndata: {data}\n\n".encode()


class RunLog:
    """One AG-UI run's events, numbered from 1."""

    def __init__(self, translator: Translator, principal: str | None) -> None:
        self.translator = translator
        self.principal = principal
        self.frames: list[bytes] = []  # what a stream sends, kept for the run's life here
        self._unstored: list[AguiEvent] = []  # the events themselves, until the store has them
        self.done = trio.Event()
        self._changed = trio.Event()  # set (and replaced) when events are added

    @property
    def run_id(self) -> str:
        return self.translator.run_id

    def add(self, events: Sequence[AguiEvent]) -> None:
        if self.done.is_set():
            return  # nothing follows a terminal event (lifecycle.mdx, "after a run closes")
        for event in events:
            self._unstored.append(event)
            self.frames.append(frame(len(self.frames) + 1, event))
        self._changed.set()
        self._changed = trio.Event()

    def end(self, events: Sequence[AguiEvent]) -> None:
        self.add(events)
        self.done.set()

    def after(self, last_id: int) -> bytes:
        return b"".join(self.frames[max(last_id, 0) :])

    def take_unstored(self) -> list[AguiEvent]:
        """The run's events, once it has ended, for the store (memory keeps only the frames)."""
        taken, self._unstored = self._unstored, []
        return taken

    async def follow(self, write: StreamWriter, last_id: int) -> None:
        """Write the events after ``last_id`` as they come, to the run's terminal event. What
        was added while a write was under way goes in the next write, all of it at once."""
        sent = max(last_id, 0)
        while True:
            changed = self._changed
            if sent < len(self.frames):
                ready = len(self.frames)
                await write(b"".join(self.frames[sent:ready]))
                sent = ready
            elif self.done.is_set():
                return
            else:
                await changed.wait()


class AguiRuns:
    """The AG-UI logs of one kernel (kept in its stash)."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.logs: dict[str, RunLog] = {}
        # For the kernel's life, as the stash that holds this (only kernels that serve AG-UI).
        kernel.events.observe(self.observe, TRANSLATED)

    def open(self, log: RunLog) -> None:
        self.logs[log.run_id] = log
        finished = [run_id for run_id, kept in self.logs.items() if kept.done.is_set()]
        for run_id in finished[: max(0, len(finished) - FINISHED_KEPT)]:
            del self.logs[run_id]

    def observe(self, event: Event) -> None:
        log = self.logs.get(event.run_id or "")
        if log is None or log.done.is_set():
            return  # another run (the HTTP API's, a workflow step's sub-run)
        data, translator = event.data, log.translator
        if event.type == "text.delta":
            log.add(translator.text(str(data.get("text", ""))))
        elif event.type == "tool.call":
            log.add(translator.tool_call(str(data["id"]), str(data["name"]), data["arguments"]))
        elif event.type == "tool.result":
            preview = str(data.get("preview", ""))
            log.add(translator.tool_result(str(data["id"]), preview, bool(data.get("is_error"))))

    async def execute(self, log: RunLog, agent_id: str, text: str, handle: RunHandle) -> None:
        """Run it (in the kernel's nursery: the run is the server's, not the request's) and
        end its log with how it ended."""
        translator = log.translator
        try:
            result: RunResult = await self.kernel.run(
                agent_id,
                text,
                session_id=translator.thread_id,
                run_id=translator.run_id,
                principal=log.principal,
                stream=True,
                reservation=handle,
            )
        except Exception as exc:  # one run's failure must not end the kernel's background work
            logger.error("AG-UI run %s failed: %s", log.run_id, exc, exc_info=exc)
            log.end(translator.fail(f"run {log.run_id} failed: {exc}"))
        else:
            log.end(translator.finish(result))
        finally:
            if not log.done.is_set():  # cancelled from outside: the kernel stops
                log.end(translator.stopped())
            # Shielded: a run cancelled by the kernel stopping is resumed from the store later.
            with trio.CancelScope(shield=True), trio.move_on_after(STORE_WAIT):
                await self._store(log)

    async def _store(self, log: RunLog) -> None:
        events = [RunEvent(n, EVENT_NAME, e) for n, e in enumerate(log.take_unstored(), 1)]
        batch = RunEventBatch(STORE_PREFIX + log.run_id, log.principal, events)
        try:
            await self.kernel.store().append_run_events([batch], keep=len(events))
        except StorageError as exc:  # memory still has it; only a later resume may miss it
            logger.warning("AG-UI run %s: its events were not stored: %s", log.run_id, exc)

    async def stored(self, run_id: str, last_id: int) -> tuple[str | None, bytes] | None:
        """A finished run's stored events after ``last_id`` as SSE, and its principal; None
        when the store has none of the run."""
        store, after = self.kernel.store(), last_id
        out: list[bytes] = []
        principal: str | None = None
        while True:
            page = await store.run_events(STORE_PREFIX + run_id, after, 1000)
            if page is None:
                return None if after == last_id else (principal, b"".join(out))
            principal = page.principal
            if not page.events:
                return principal, b"".join(out)
            for event in page.events:
                out.append(frame(event.id, dict(event.data)))
                after = event.id
