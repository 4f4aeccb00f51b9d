"""A run's kernel events as AG-UI 1.0 events: sans-I/O, one :class:`Translator` per run.

What the engine emits (``text.delta``, ``tool.call``, ``tool.result``) becomes the streaming
triads of AG-UI; how the run ended (its :class:`RunResult`) becomes the terminal event. The
thread so far is a MESSAGES_SNAPSHOT at the start; the run's progress under ``state.soulacy``
is a STATE_SNAPSHOT at the start and the end, and a STATE_DELTA (JSON Patch, RFC 6902) each time
it changes between them (``llm.call``, ``tool.call``, ``tool.approval``). The translator keeps
the one rule AG-UI checks most: what a run opened is closed before it ends, and a text message
is closed before a tool call starts (the model's text of a turn comes before its calls). Events
are plain dicts in the wire's camelCase, written here, never by the SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from soulacy.kernel import RunResult
from soulacy.kernel.store import HistoryEntry

PROTOCOL_VERSION = "1.0"  # the AG-UI schema this module writes (spec/1.0/schema.json)
SHUTDOWN = "shutdown"  # the reason of a run cut by its server stopping (soulacy.kernel's)

AguiEvent = dict[str, Any]
# What a resume entry's payload answers to a tool call's approval interrupt.
APPROVAL_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "run the call (true) or refuse it"},
        "note": {"type": "string", "description": "why, kept with the decision"},
    },
    "required": ["approved"],
}


class Translator:
    """The AG-UI events of one run, made as its kernel events arrive."""

    def __init__(self, thread_id: str, run_id: str, state: Mapping[str, Any] | None) -> None:
        self.thread_id = thread_id
        self.run_id = run_id  # the Soulacy run's: it names the run's messages and tool calls
        self.agui_run_id = run_id  # the AG-UI run's that carries its events (a resume's later)
        self.state = dict(state or {})
        self.agent_id = ""
        # The run's progress, state.soulacy: snapshots hold all of it, deltas what changed.
        self.progress: dict[str, Any] = {}
        self._messages = 0  # assistant text messages opened so far
        self._open_message: str | None = None
        self._said_since_tools = False  # text streamed after the last tool result

    def start(self, agent_id: str, messages: Sequence[AguiEvent] | None = None) -> list[AguiEvent]:
        """RUN_STARTED, the thread's messages so far (``messages``, when given: the client's
        list is replaced by them), then the state the client sent with Soulacy's view of the
        run."""
        self.agent_id = agent_id
        out: list[AguiEvent] = [self._started()]
        if messages is not None:
            out.append({"type": "MESSAGES_SNAPSHOT", "messages": list(messages)})
        self.progress = {
            "agentId": agent_id,
            "status": "running",
            "modelCalls": 0,
            "toolCalls": 0,
            "approvals": {},
        }
        return [*out, self._snapshot()]

    def _started(self, parent: str | None = None) -> AguiEvent:
        started = {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.agui_run_id,
            "protocolVersion": PROTOCOL_VERSION,
        }
        if parent is not None:
            started["parentRunId"] = parent
        return started

    def resumed(self, agui_run_id: str, state: Mapping[str, Any] | None) -> list[AguiEvent]:
        """The AG-UI run ``agui_run_id`` that resumes this run after an interrupt: its
        RUN_STARTED (``parentRunId`` the interrupted one), then the state as it is."""
        parent, self.agui_run_id = self.agui_run_id, agui_run_id
        if state:
            self.state = dict(state)
        return [self._started(parent), self._snapshot()]

    def interrupted(self, pending: Mapping[str, Mapping[str, Any]]) -> list[AguiEvent]:
        """The run waits for a person's decision on each ``pending`` call (by call id): this
        AG-UI run ends with the interrupt outcome, one interrupt per call, which the client's
        next run answers (``resume``)."""
        interrupts = [self._interrupt(call_id, data) for call_id, data in pending.items()]
        outcome = {"type": "interrupt", "interrupts": interrupts}
        return [*self._close_message(), self._snapshot(), {**self._finished(), "outcome": outcome}]

    def _interrupt(self, call_id: str, data: Mapping[str, Any]) -> AguiEvent:
        tool = str(data.get("name", ""))
        reasons = [str(r) for r in data.get("reasons") or ()]
        why = f": {'; '.join(reasons)}" if reasons else ""
        return {
            "id": self.tool_call_id(call_id),
            "reason": "tool_approval",
            "message": f"the tool call {tool} waits for a person's approval{why}",
            "toolCallId": self.tool_call_id(call_id),
            "responseSchema": APPROVAL_SCHEMA,
            "metadata": {"soulacy": {"runId": self.run_id, "callId": call_id, "tool": tool}},
        }

    def model_called(self) -> list[AguiEvent]:
        """The run asks its model once more: ``modelCalls`` counts up."""
        return self._change("modelCalls", self.progress.get("modelCalls", 0) + 1)

    def approval(self, call_id: str, data: Mapping[str, Any]) -> list[AguiEvent]:
        """A tool call waits for a person's decision (``pending``), or has it (``approved``,
        ``denied``, or ``happened``: a call cut while it ran was told it happened, and is not
        run again): ``approvals.<toolCallId>`` says which, and what the call was."""
        tool_call_id = self.tool_call_id(call_id)
        found = {"tool": str(data.get("name", "")), "status": str(data.get("status", "pending"))}
        if data.get("reasons"):
            found["reasons"] = data["reasons"]
        if data.get("decided_by"):
            found["decidedBy"] = data["decided_by"]
        approvals = self.progress.setdefault("approvals", {})
        approvals[tool_call_id] = found
        path = f"/soulacy/approvals/{_pointer(tool_call_id)}"
        return [{"type": "STATE_DELTA", "delta": [{"op": "add", "path": path, "value": found}]}]

    def _change(self, key: str, value: Any) -> list[AguiEvent]:
        op = "replace" if key in self.progress else "add"
        self.progress[key] = value
        delta = [{"op": op, "path": f"/soulacy/{_pointer(key)}", "value": value}]
        return [{"type": "STATE_DELTA", "delta": delta}]

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
        out += self._change("toolCalls", self.progress.get("toolCalls", 0) + 1)
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
        self.progress.update(
            agentId=result.agent_id,
            status=result.status,
            turns=result.turns,
            toolCalls=result.tool_calls,
        )
        if result.incomplete_reason:
            self.progress["incompleteReason"] = result.incomplete_reason
        out.append(self._snapshot())
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
        self.progress.update(agentId=self.agent_id, status="interrupted")
        self.progress["incompleteReason"] = SHUTDOWN
        message = f"run {self.run_id} ended interrupted: {SHUTDOWN} (the server stopped)"
        return [*self._close_message(), self._snapshot(), error_event(message, SHUTDOWN)]

    def fail(self, message: str, code: str = "failed") -> list[AguiEvent]:
        """RUN_ERROR for a run that ended without a result (it raised). RUN_ERROR ends whatever
        is still open along with the run."""
        return [error_event(message, code)]

    def _cancelled(self) -> AguiEvent:
        return {**self._finished(), "outcome": {"type": "cancelled"}}

    def _finished(self) -> AguiEvent:
        return {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.agui_run_id}

    def _snapshot(self) -> AguiEvent:
        # The client's state, never changed by Soulacy, plus the run's progress under a key of
        # Soulacy's own: a snapshot replaces the state, so what the client sent is kept in it.
        progress = json.loads(json.dumps(self.progress))  # a copy: later deltas change it
        return {"type": "STATE_SNAPSHOT", "snapshot": {**self.state, "soulacy": progress}}

    def _close_message(self) -> list[AguiEvent]:
        if self._open_message is None:
            return []
        closed = {"type": "TEXT_MESSAGE_END", "messageId": self._open_message}
        self._open_message = None
        return [closed]


def thread_messages(
    entries: Sequence[HistoryEntry], current: Mapping[str, Any] | None = None
) -> list[AguiEvent]:
    """A thread's stored messages as AG-UI messages (user, assistant with its tool calls, tool),
    then ``current``, the run's own input message: what MESSAGES_SNAPSHOT sends. Ids are
    ``RUN_ID:ENTRY_ID``, and a tool call's ``RUN_ID:CALL_ID`` as its streamed events say."""
    out: list[AguiEvent] = []
    for entry in entries:
        run = entry.run_id or "history"
        message: AguiEvent = {"id": f"{run}:{entry.id}", "role": entry.role}
        if entry.role == "user":
            message["content"] = entry.content
        elif entry.role == "assistant":
            if entry.content:
                message["content"] = entry.content
            if entry.tool_calls:
                message["toolCalls"] = [
                    {
                        "id": f"{run}:{call['id']}",
                        "type": "function",
                        "function": {
                            "name": str(call["name"]),
                            "arguments": json.dumps(call.get("arguments", {}), default=str),
                        },
                    }
                    for call in entry.tool_calls
                ]
            if not entry.content and not entry.tool_calls:
                continue
        elif entry.role == "tool" and entry.tool_call_id:
            message["content"] = entry.content
            message["toolCallId"] = f"{run}:{entry.tool_call_id}"
            if entry.is_error:
                message["error"] = entry.content
        else:  # system messages, and what no AG-UI message can carry
            continue
        out.append(message)
    if current is not None:
        out.append(dict(current))
    return out


def _pointer(key: str) -> str:
    """``key`` as one JSON Pointer reference token (RFC 6901: ``~`` and ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


def error_event(message: str, code: str) -> AguiEvent:
    return {"type": "RUN_ERROR", "message": message, "code": code}


def _why(result: RunResult) -> str:
    reason = result.error or result.incomplete_reason or "no reason given"
    return f"run {result.run_id} ended {result.status}: {reason}"
