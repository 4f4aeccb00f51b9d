"""A2A tasks as runs: a task's id is its run's id, its context id the run's conversation
(``session_id``). Each task started here keeps a log of the stream events it produced, numbered
from 1, so that a client that reconnects with ``Last-Event-ID`` gets what it missed.

The run streams: each ``text.delta`` of a task's run is a chunk of its ``reply`` artifact as the
model writes it (``append`` after the first chunk of a turn; a turn's first chunk replaces what
an earlier turn wrote before its tool calls), and the run's end sends the whole reply once more,
replacing the chunks, with ``lastChunk``: a client that aggregates by A2A's rules ends with the
reply itself, and one that reads only the last artifact event gets it whole."""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from soulacy.kernel import Event, Kernel, RunHandle, RunRequest, RunResult

from . import _wire as wire
from ._push import Pushes

logger = logging.getLogger("soulacy.a2a")

STREAMED = ("text.delta", "tool.call")  # the kernel events a task's stream is made of
KEPT_FINISHED = 256  # finished tasks whose logs stay in memory (older ones: read from the store)
CANCEL_REASON = "cancelled by the A2A client"


class KernelClosed(Exception):
    """The kernel is not open: it has no nursery to run a task in."""


@attrs.define(eq=False)
class TaskLog:
    """One task started by this process: its state, and the stream events that told it."""

    task_id: str
    context_id: str
    agent_id: str
    principal: str | None
    history: list[dict[str, Any]]
    state: str = wire.WORKING
    status_message: dict[str, Any] | None = None
    artifacts: list[dict[str, Any]] = attrs.Factory(list)
    metadata: dict[str, Any] = attrs.Factory(dict)
    updated: str = attrs.Factory(wire.timestamp)
    events: list[tuple[int, dict[str, Any]]] = attrs.Factory(list)
    changed: trio.Event = attrs.Factory(trio.Event)
    turn_open: bool = False  # this turn's text has begun: a chunk appends to it
    ended_at: float | None = None  # when it reached its final state (seconds since the epoch)
    push: Pushes | None = None  # its push notification configs, once a client names one

    @property
    def reply_id(self) -> str:
        return f"{self.task_id}-reply"

    @property
    def done(self) -> bool:
        return self.state in wire.TERMINAL

    def task(self, history_length: int | None = None) -> dict[str, Any]:
        """The task as A2A's ``Task`` object, with the last ``history_length`` messages."""
        status: dict[str, Any] = {"state": self.state, "timestamp": self.updated}
        if self.status_message is not None:
            status["message"] = self.status_message
        history = list(self.history if history_length is None else self.history[-history_length:])
        found: dict[str, Any] = {
            "id": self.task_id,
            "contextId": self.context_id,
            "status": status,
            "history": history if history_length != 0 else [],
            "metadata": {"agent_id": self.agent_id, **self.metadata},
        }
        if self.artifacts:  # copies: the reply's chunks go on adding to the artifact
            found["artifacts"] = [{**a, "parts": list(a["parts"])} for a in self.artifacts]
        return found

    def add(self, event: Mapping[str, Any]) -> None:
        self.events.append((len(self.events) + 1, dict(event)))
        if self.push is not None:
            self.push.offer(event)
        self.changed.set()
        self.changed = trio.Event()

    def after(self, last_id: int) -> list[tuple[int, dict[str, Any]]]:
        return self.events[last_id:]

    def text(self, delta: str) -> None:
        """A piece of the reply as the model writes it: a chunk of the ``reply`` artifact."""
        if not delta or self.done:
            return
        append = self.turn_open
        self.turn_open = True
        part = {"text": delta}
        if append and self.artifacts:
            self.artifacts[0]["parts"].append(part)
        else:  # a turn's first chunk: the artifact anew (a tool call ended the earlier text)
            self.artifacts = [{"artifactId": self.reply_id, "name": "reply", "parts": [part]}]
        chunk = {"artifactId": self.reply_id, "name": "reply", "parts": [part]}
        self._artifact_update(chunk, append=append, last=False)

    def tool_called(self) -> None:
        """The model called a tool: the text it wrote before was not its reply."""
        self.turn_open = False

    def _artifact_update(self, artifact: dict[str, Any], *, append: bool, last: bool) -> None:
        update: dict[str, Any] = {
            "taskId": self.task_id,
            "contextId": self.context_id,
            "artifact": artifact,
            "lastChunk": last,
        }
        if append:
            update["append"] = True
        self.add({"artifactUpdate": update})

    def finish(self, result: RunResult) -> None:
        """The run ended: its reply becomes the task's artifact and last message, its status
        the task's final state (a stream's last event)."""
        self.metadata = result.metadata()
        if result.reply:
            artifact = {
                "artifactId": self.reply_id,
                "name": "reply",
                "parts": [{"text": result.reply}],
            }
            self.artifacts = [artifact]
            self.history.append(
                wire.text_message(
                    "ROLE_AGENT", result.reply, self.reply_id, self.context_id, self.task_id
                )
            )
            # The whole reply, replacing the chunks streamed (append: false).
            self._artifact_update(dict(artifact), append=False, last=True)
        state = wire.STATE_OF_STATUS.get(result.status, wire.FAILED)
        reason = None
        if state != wire.COMPLETED:
            reason = result.incomplete_reason or result.error or result.status
            reason = f"run {self.task_id} ended {result.status}: {reason}"
        self.end(state, reason, result.finished_at or None)

    def end(self, state: str, reason: str | None = None, at: float | None = None) -> None:
        """The task's final state (a stream's last event), at ``at`` (None: now)."""
        self.state = state
        self.ended_at = time.time() if at is None else at
        self.updated = wire.timestamp(self.ended_at)
        if reason is not None:
            self.status_message = wire.text_message(
                "ROLE_AGENT", reason, f"{self.task_id}-status", self.context_id, self.task_id
            )
        self.add(
            {
                "statusUpdate": {
                    "taskId": self.task_id,
                    "contextId": self.context_id,
                    "status": self.task()["status"],
                    "metadata": {"agent_id": self.agent_id, **self.metadata},
                }
            }
        )
        if self.push is not None:
            self.push.close()


class Tasks:
    """The tasks this kernel's A2A server started: each a run in the kernel's nursery."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.logs: OrderedDict[str, TaskLog] = OrderedDict()
        # For the kernel's life, as the stash that holds this (only kernels that serve A2A).
        kernel.events.observe(self.observe, STREAMED)

    def observe(self, event: Event) -> None:
        """A task's run streams: its text is the reply's chunks; a tool call ends a turn's."""
        log = self.logs.get(event.run_id or "")
        if log is None or log.done:
            return  # another run (the HTTP API's, a sub-run)
        if event.type == "text.delta":
            log.text(str(event.data.get("text", "")))
        else:
            log.tool_called()

    def get(self, task_id: str) -> TaskLog | None:
        return self.logs.get(task_id)

    def push_to(self, log: TaskLog, config: dict[str, Any]) -> None:
        """Deliver the task's next updates to ``config``'s URL too (its delivery runs in the
        kernel's nursery, until the task has ended and its last update is sent)."""
        if log.push is None:
            pushes = Pushes(log.task_id)
            name = f"a2a push notifications of task {log.task_id}"
            if not self.kernel.start_soon(pushes.deliver, name=name):
                raise KernelClosed("the kernel is not open: it delivers no push notification")
            log.push = pushes
        log.push.add(config)

    def start(
        self,
        agent_id: str,
        text: str,
        message: Mapping[str, Any],
        context_id: str | None,
        principal: str | None,
    ) -> TaskLog:
        """Start a run of ``agent_id`` on ``text`` as a task and return its log, whose first
        event is the task. Raises what ``Runner.reserve`` raises (capacity, a run id in
        use) before anything starts."""
        task_id = uuid.uuid4().hex
        context_id = context_id or uuid.uuid4().hex
        run = RunRequest(agent_id, text, session_id=context_id, run_id=task_id, principal=principal)
        handle = self.kernel.runner().reserve(run, exclusive=True)
        sent = {**message, "taskId": task_id, "contextId": context_id}
        log = TaskLog(task_id, context_id, agent_id, principal, [sent])
        log.add({"task": log.task()})
        if not self.kernel.start_soon(self._run, log, text, handle, name=f"a2a task {task_id}"):
            self.kernel.runner().release(handle)
            raise KernelClosed("the kernel is not open: it runs no task")
        self._keep(log)
        return log

    def _keep(self, log: TaskLog) -> None:
        self.logs[log.task_id] = log
        finished = [key for key, kept in self.logs.items() if kept.done]
        for key in finished[: max(0, len(finished) - KEPT_FINISHED)]:
            del self.logs[key]

    async def _run(self, log: TaskLog, text: str, handle: RunHandle) -> None:
        try:
            result = await self.kernel.run(
                log.agent_id,
                text,
                session_id=log.context_id,
                run_id=log.task_id,
                principal=log.principal,
                stream=True,  # text deltas: the reply's chunks
                reservation=handle,
            )
        except Exception as exc:  # the agent could not run (its SOUL.yaml, its provider …)
            logger.warning("A2A task %s of agent %r failed: %s", log.task_id, log.agent_id, exc)
            self.kernel.runner().release(handle)
            log.end(wire.FAILED, f"run {log.task_id} could not run: {exc}")
        except BaseException:  # cancelled with the kernel's background work: the server stops
            log.end(wire.FAILED, f"run {log.task_id} was stopped: the server shut down")
            raise
        else:
            log.finish(result)
        self._keep(log)
