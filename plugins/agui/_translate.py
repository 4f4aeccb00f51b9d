"""A run's kernel events as AG-UI 1.0 events: sans-I/O, one :class:`Translator` per run.

What the engine emits (``text.delta``, ``tool.call``, ``tool.result``) becomes the streaming
triads of AG-UI; how the run ended (its :class:`RunResult`) becomes the terminal event. The
translator keeps the one rule AG-UI checks most: what a run opened is closed before it ends, and
a text message is closed before a tool call starts (the model's text of a turn comes before its
calls). Events are plain dicts in the wire's camelCase, written here, never by the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from soulacy.kernel import RunResult

PROTOCOL_VERSION = "1.0"  # the AG-UI schema this module writes (spec/1.0/schema.json)
SHUTDOWN = "shutdown"  # the reason of a run cut by its server stopping (soulacy.kernel's)

AguiEvent = dict[str, Any]


class Translator:
    """The AG-UI events of one run, made as its kernel events arrive."""

    def __init__(self, thread_id: str, run_id: str, state: Mapping[str, Any] | None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.state = dict(state or {})
        self.agent_id = ""
        self._messages = 0  # assistant text messages opened so far
        self._open_message: str | None = None
        self._said_since_tools = False  # text streamed after the last tool result

    def start(self, agent_id: str) -> list[AguiEvent]:
        """RUN_STARTED, then the state the client sent with Soulacy's view of the run."""
        self.agent_id = agent_id
        started = {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "protocolVersion": PROTOCOL_VERSION,
        }
        return [started, self._snapshot({"agentId": agent_id, "status": "running"})]

    def text(self, delta: str) -> list[AguiEvent]:
        if not delta:  # TEXT_MESSAGE_CONTENT may not carry an empty delta
            return []
        out = []
        if self._open_message is None:
            self._messages += 1
            self._open_message = f"{self.run_id}:m{self._messages}"
            out.append(
                {"type": "TEXT_MESSAGE_START", "messageId": self._open_message, "role": "assistant"}
            )
        self._said_since_tools = True
        content = {"type": "TEXT_MESSAGE_CONTENT", "messageId": self._open_message, "delta": delta}
        out.append(content)
        return out

    def tool_call(self, call_id: str, name: str, arguments: Mapping[str, Any]) -> list[AguiEvent]:
        parent = self._open_message  # the text the model wrote before the call, this turn
        out = self._close_message()
        tool_call_id = self.tool_call_id(call_id)
        start: AguiEvent = {
            "type": "TOOL_CALL_START",
            "toolCallId": tool_call_id,
            "toolCallName": name,
        }
        if parent is not None:
            start["parentMessageId"] = parent
        args = json.dumps(arguments, default=str)  # already redacted by the engine
        out += [start, {"type": "TOOL_CALL_ARGS", "toolCallId": tool_call_id, "delta": args}]
        out.append({"type": "TOOL_CALL_END", "toolCallId": tool_call_id})
        return out

    def tool_call_id(self, call_id: str) -> str:
        """The call's AG-UI id: unique in the thread, as AG-UI clients need (they look calls up
        by id across the thread's runs), where a model's ids need only be unique in a run."""
        return f"{self.run_id}:{call_id}"

    def tool_result(self, call_id: str, preview: str, is_error: bool) -> list[AguiEvent]:
        self._said_since_tools = False
        result: AguiEvent = {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{self.run_id}:t:{call_id}",
            "toolCallId": self.tool_call_id(call_id),
            "content": preview,
            "role": "tool",
        }
        if is_error:
            result["metadata"] = {"soulacy": {"isError": True}}
        return [result]

    def finish(self, result: RunResult) -> list[AguiEvent]:
        """How the run ended: RUN_FINISHED (success, or the cancelled outcome) or RUN_ERROR,
        after closing what is open. A reply that did not stream (a provider that does not
        stream) is sent whole as one message first."""
        out: list[AguiEvent] = []
        if result.reply and not self._said_since_tools and self._open_message is None:
            out += self.text(result.reply)
        out += self._close_message()
        progress: dict[str, Any] = {"agentId": result.agent_id, "status": result.status}
        progress.update(turns=result.turns, toolCalls=result.tool_calls)
        if result.incomplete_reason:
            progress["incompleteReason"] = result.incomplete_reason
        out.append(self._snapshot(progress))
        if result.status == "completed":
            finished = self._finished()
            finished["result"] = {"reply": result.reply, "verification": result.verification}
            return [*out, finished]
        if result.status == "cancelled":  # stopped on purpose: not a failure (lifecycle.mdx)
            return [*out, self._cancelled()]
        return [*out, error_event(_why(result), result.incomplete_reason or result.status)]

    def stopped(self) -> list[AguiEvent]:
        """The server stopped during the run, which is stored ``interrupted`` (reason
        ``shutdown``), as the HTTP API's runs are then: not a stop anyone asked for, and the
        stream is torn down under it, so RUN_ERROR (lifecycle.mdx, "cancelled runs")."""
        progress = {"agentId": self.agent_id, "status": "interrupted"}
        progress["incompleteReason"] = SHUTDOWN
        message = f"run {self.run_id} ended interrupted: {SHUTDOWN} (the server stopped)"
        return [*self._close_message(), self._snapshot(progress), error_event(message, SHUTDOWN)]

    def fail(self, message: str, code: str = "failed") -> list[AguiEvent]:
        """RUN_ERROR for a run that ended without a result (it raised). RUN_ERROR ends whatever
        is still open along with the run."""
        return [error_event(message, code)]

    def _cancelled(self) -> AguiEvent:
        return {**self._finished(), "outcome": {"type": "cancelled"}}

    def _finished(self) -> AguiEvent:
        return {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}

    def _snapshot(self, progress: Mapping[str, Any]) -> AguiEvent:
        # The client's state, never changed by Soulacy, plus the run's progress under a key of
        # Soulacy's own: a snapshot replaces the state, so what the client sent is kept in it.
        return {"type": "STATE_SNAPSHOT", "snapshot": {**self.state, "soulacy": dict(progress)}}

    def _close_message(self) -> list[AguiEvent]:
        if self._open_message is None:
            return []
        closed = {"type": "TEXT_MESSAGE_END", "messageId": self._open_message}
        self._open_message = None
        return [closed]


def error_event(message: str, code: str) -> AguiEvent:
    return {"type": "RUN_ERROR", "message": message, "code": code}


def _why(result: RunResult) -> str:
    reason = result.error or result.incomplete_reason or "no reason given"
    return f"run {result.run_id} ended {result.status}: {reason}"
