"""From the kernel's event stream to spans and metrics.

Every event is handled synchronously in the ``soulacy_event`` hook; no Python context is kept
across the run's awaits. Open spans are keyed by run id (the run, its workflow steps, its
reasoning steps) and by call id (model and tool calls in progress), and every span is given
its start and end times explicitly, read from the clock when its events arrive.

A model call or a tool call is a leaf: its span is made when the call ends, with its start time,
all its attributes and its end time at once (one pass through the SDK's attribute checks
instead of two). A run, a workflow step and a reasoning step have children, so theirs are
started when they start. A call still in progress when its run ends is ended with the run,
as an error saying why the run ended.

What only the reply says (the model that answered, the response's id) is not in the events:
the plugin's run participant hands it over (:meth:`Observer.replied`) just before the call's
``llm.result``. Which server a call goes to is read once per provider, from its ``base_url``
(or, unset, the provider class's ``default_base_url``).

Bounded: spans open at once, in total (``otel.max_open_spans``) and per run
(``otel.max_open_spans_per_run``), and spans made per run (``otel.max_spans_per_run``). A span
over a bound is not made, and counted in ``soulacy.otel.spans.dropped`` with the bound's name;
metrics are kept whatever the bounds.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from soulacy.kernel import Event, Kernel, redact, redact_text
from soulacy.kernel.engine import Run

from . import _names as n
from ._config import OtelConfig
from ._metrics import Metrics

Attributes = dict[str, AttributeValue]
Server = tuple[str, int | None]  # server.address, server.port
FINISHED_KEPT = 1024  # span contexts of ended runs kept, to link a later attempt to
NS = 1_000_000_000
DEFAULT_PORTS = {"http": 80, "https": 443}


_W3C = TraceContextTextMapPropagator()  # the caller's traceparent (RunRequest.trace)


class Pending:
    """A model call or a tool call in progress: its span is made when it ends."""

    __slots__ = (
        "attributes",
        "chars",
        "chunk",
        "parent",
        "response_id",
        "response_model",
        "start",
        "text",
        "traced",
    )

    def __init__(self, start: int, parent: Context | None, traced: bool, attributes: Attributes):
        self.start = start
        self.parent = parent
        self.traced = traced  # admitted under the bounds, for a recording run
        self.attributes = attributes
        self.chunk = 0  # when the first streamed text arrived (ns), 0 before
        self.text: list[str] = []  # a streamed reply's text, with capture_content (bounded)
        self.chars = 0
        self.response_model = ""  # what the reply says (Observer.replied), for a model call
        self.response_id = ""


class RunState:
    """What is known of one run in progress."""

    __slots__ = (
        "active",
        "agent_id",
        "compacted",
        "created",
        "ctx",
        "limits",
        "llm",
        "max_output",
        "model",
        "open",
        "provider",
        "reasoning",
        "recording",
        "resolved",
        "rstep",
        "rstep_ctx",
        "rsteps",
        "run_id",
        "server",
        "span",
        "started",
        "step_ctx",
        "steps",
        "strategy",
        "tools",
    )

    def __init__(self, run_id: str, agent_id: str, started: int) -> None:
        self.run_id = run_id
        self.agent_id = agent_id
        self.started = started
        self.active = False  # counted in soulacy.runs.active
        self.span: Span | None = None
        self.ctx: Context | None = None
        self.recording = False
        self.provider = ""
        self.model = ""
        self.server: Attributes = {}  # server.address and .port of the provider's API
        self.resolved = False  # provider, model and server looked up (found or not)
        self.strategy: str | None = None
        self.reasoning: str | None = None  # the reasoning strategy's name, for reasoning runs
        self.max_output: int | None = None
        self.limits: Attributes = {}
        self.llm: Pending | None = None
        self.tools: dict[str, Pending] = {}
        self.steps: dict[str, tuple[Span, Context]] = {}
        self.step_ctx: Context | None = None
        self.rstep: Span | None = None
        self.rstep_ctx: Context | None = None
        self.rsteps = 0
        self.open = 0  # open children (steps, calls in progress) admitted under the bounds
        self.compacted = False  # the next model call's view was compacted
        self.created = 0  # spans made or admitted for this run, its own included

    def parent(self) -> Context | None:
        return self.rstep_ctx or self.step_ctx or self.ctx


class Observer:
    """Turns one kernel's events into spans (when ``tracer`` is set) and metrics."""

    def __init__(
        self, kernel: Kernel, config: OtelConfig, metrics: Metrics, tracer: Tracer | None
    ) -> None:
        self.kernel = kernel
        self.config = config
        self.metrics = metrics
        self.tracer = tracer
        self.runs: dict[str, RunState] = {}
        self.finished: OrderedDict[str, SpanContext] = OrderedDict()
        self.servers: dict[str, Attributes] = {}  # by provider name: read once
        self.open_total = 0
        self.handlers: dict[str, Callable[[RunState | None, Event, int], None]] = {
            "run.started": self._started,
            "run.limits": self._limits,
            "llm.call": self._llm_call,
            "llm.result": self._llm_result,
            "text.delta": self._delta,
            "tool.call": self._tool_call,
            "tool.result": self._tool_result,
            "workflow.step": self._step,
            "context.compacted": self._compacted,
            "run.completed": self._completed,
            # suspended waiting for a decision: this attempt's spans end (interrupted); the
            # decision resumes the run as its next attempt, traced anew
            "run.suspended": self._completed,
        }

    # -- dispatch ------------------------------------------------------------------------------

    def observe(self, event: Event) -> None:
        run_id = event.run_id
        if run_id is None:
            return
        handler = self.handlers.get(event.type)
        state = self.runs.get(run_id)
        if handler is not None:
            handler(state, event, time.time_ns())
        elif state is not None and state.recording and state.span is not None:
            # a run strategy's own event (run.claim_taken_over, a plugin's): a span event,
            # without its data, which may hold anything
            state.span.add_event(event.type, {"soulacy.event.seq": event.seq}, time.time_ns())

    def strategy_chosen(self, run: Run, strategy: object) -> None:
        """``soulacy_run_strategy`` answered: say which plugin drives the run, and the model."""
        state = self.runs.get(run.run_id)
        if state is None:
            return
        module = getattr(strategy, "__module__", None) or type(strategy).__module__
        parts = module.split(".")
        label = parts[2] if parts[:2] == ["soulacy", "plugins"] and len(parts) > 2 else module
        state.strategy = label
        if label == "reasoning":
            try:
                state.reasoning = str(run.agent.section("reasoning").strategy)
            except Exception:  # a replaced reasoning plugin with another section shape
                state.reasoning = "reasoning"
        self._resolve_model(state, run.agent)
        if state.span is not None and state.recording:
            attributes: Attributes = {n.STRATEGY: label}
            if state.reasoning:
                attributes[n.REASONING] = state.reasoning
            if state.model:
                attributes[n.REQUEST_MODEL] = state.model
            if state.provider:
                attributes[n.PROVIDER] = state.provider
            state.span.set_attributes(attributes)

    def replied(self, run_id: str, reply: object) -> None:
        """A model call of run ``run_id`` returned ``reply`` (a ``ModelReply``; its
        ``llm.result`` follows): keep what only the reply says, the model that answered and,
        when the reply carries one (``id``), the provider's id of the response."""
        state = self.runs.get(run_id)
        pending = state.llm if state is not None else None
        if pending is None:
            return
        model = getattr(reply, "model", None)
        if isinstance(model, str):
            pending.response_model = model
        found = getattr(reply, "id", None)
        if isinstance(found, str):
            pending.response_id = found

    # -- runs ----------------------------------------------------------------------------------

    def _started(self, state: RunState | None, event: Event, now: int) -> None:
        data, run_id = event.data, str(event.run_id)
        if state is not None:  # a run id seen again before its end: close what was open
            self._end_run(state, now, {}, lost="superseded")
        agent_id = str(data.get("agent_id") or "")
        state = self.runs[run_id] = RunState(run_id, agent_id, now)
        state.active = True
        self.metrics.active.add((agent_id,), 1)
        if self.tracer is not None:
            self._start_run_span(state, data, now)

    def _start_run_span(self, state: RunState, data: Mapping[str, Any], now: int) -> None:
        assert self.tracer is not None
        if self.open_total >= self.config.max_open_spans:
            self.metrics.dropped.add(("max_open_spans",))
            return
        agent_id, run_id = state.agent_id, state.run_id
        parent, parent_run = self._parent_of(run_id)
        carrier = data.get("trace") if self.config.trust_inbound_trace else None
        if parent is None and isinstance(carrier, Mapping):  # the caller's trace goes on
            parent = _W3C.extract(carrier={str(k): str(v) for k, v in carrier.items()})
        attributes: Attributes = {
            n.OPERATION: n.INVOKE_AGENT,
            n.AGENT_ID: agent_id,
            n.AGENT_NAME: self._agent_name(agent_id),
            n.RUN_ID: run_id,
        }
        session = data.get("session_id")
        if session:
            attributes[n.SESSION_ID] = attributes[n.CONVERSATION_ID] = str(session)
        if data.get("principal"):
            attributes[n.PRINCIPAL] = str(data["principal"])
        if parent_run:
            attributes[n.PARENT_RUN] = parent_run
        if self.config.capture_content:
            if data.get("user_id"):
                attributes[n.USER_ID] = str(data["user_id"])
            text = data.get("text")
            if isinstance(text, str):
                attributes[n.INPUT_MESSAGES] = self._messages("user", text)
        earlier = self.finished.get(run_id)
        links = [Link(earlier, {n.LINK_TYPE: "previous_attempt"})] if earlier else None
        name = attributes[n.AGENT_NAME]
        span = self.tracer.start_span(
            f"{n.INVOKE_AGENT} {name}" if name else n.INVOKE_AGENT,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=links,
            start_time=now,
        )
        state.span = span
        state.recording = span.is_recording()
        state.ctx = trace_api.set_span_in_context(span)
        state.created = 1
        self.open_total += 1

    def _parent_of(self, run_id: str) -> tuple[Context | None, str | None]:
        """A workflow step's sub-run (``RUN:STEP``) is a child of that step's span."""
        parent_id, sep, step = run_id.rpartition(":")
        if not sep:
            return None, None
        parent = self.runs.get(parent_id)
        if parent is None:
            return None, None
        found = parent.steps.get(step)
        if found is not None:
            return found[1], parent_id
        # the step's span was not made (a bound): the workflow's run is the parent
        return (parent.ctx, parent_id) if parent.strategy == "workflows" else (None, None)

    def _limits(self, state: RunState | None, event: Event, now: int) -> None:
        if state is None:
            return
        limits: Attributes = {}
        for name, limit in event.data.items():
            if not isinstance(limit, Mapping):
                continue
            value = limit.get("value")
            if limit.get("unlimited") or value is None:
                limits[n.LIMIT + name] = "unlimited"
            elif isinstance(value, bool | int | float | str):
                limits[n.LIMIT + name] = value
            if name == "max_output_tokens" and isinstance(value, int) and value > 0:
                state.max_output = value
        state.limits = limits
        if state.span is not None and state.recording:
            state.span.set_attributes(limits)

    def _completed(self, state: RunState | None, event: Event, now: int) -> None:
        data = event.data
        run_id = str(event.run_id)
        if state is None:  # ended before it started (cancelled while queued, refused)
            started = data.get("started_at")
            start = int(float(started) * NS) if isinstance(started, int | float) else now
            state = RunState(run_id, str(data.get("agent_id") or ""), min(start, now))
            if self.tracer is not None:
                self._start_run_span(state, {"session_id": data.get("session_id")}, state.started)
        self._end_run(state, now, data)

    def _end_run(
        self, state: RunState, now: int, data: Mapping[str, Any], lost: str | None = None
    ) -> None:
        """End the run's spans. ``lost``: its end was not seen (``superseded`` by a run of the
        same id, ``kernel_closed``), so it is not counted as a run that ended."""
        self.runs.pop(state.run_id, None)
        metrics, agent = self.metrics, state.agent_id
        status = str(data.get("status") or ("unknown" if lost else "failed"))
        reason = data.get("incomplete_reason")
        reason_text = str(reason) if reason else (lost or "")
        why = reason_text or status
        if state.active:
            metrics.active.add((agent,), -1)
        if lost is None:
            verification = str(data.get("verification") or "unverified")
            metrics.runs.add((agent, status, reason_text or "none", verification))
            duration = data.get("duration_s")
            if isinstance(duration, int | float):
                metrics.run_duration.record(float(duration), {n.AGENT: agent, n.STATUS: status})
            cost = data.get("cost_usd")
            if isinstance(cost, int | float) and cost > 0:
                metrics.cost.add((agent,), float(cost))
            if reason == "no_progress":
                evidence = data.get("evidence")
                idle = isinstance(evidence, Mapping) and "idle_replies" in evidence
                metrics.progress_stops.add((agent, "idle_replies" if idle else "stalled_tool"))
        # what was still open ends with the run, saying why
        if state.llm is not None:
            self._end_llm(state, now, None, error=why)
        for call_id in list(state.tools):
            self._end_tool(state, call_id, now, None, error=why)
        for step_id in list(state.steps):
            self._end_step(state, step_id, now, "interrupted", error=why)
        self._end_rstep(state, now)
        span = state.span
        if span is None:
            return
        self.open_total -= 1
        if not state.recording:
            span.end(end_time=now)
            return
        attributes: Attributes = {n.STATUS: status}
        if reason_text:
            attributes[n.REASON] = reason_text
        for key, name in (
            ("verification", n.VERIFICATION),
            ("turns", n.TURNS),
            ("llm_calls", n.LLM_CALLS),
            ("tool_calls", n.TOOL_CALLS),
        ):
            value = data.get(key)
            if isinstance(value, str | int):
                attributes[name] = value
        attributes[n.ATTEMPT] = int(data.get("attempt") or 1)
        tokens = data.get("tokens")
        if isinstance(tokens, Mapping):
            attributes[n.INPUT_TOKENS] = int(tokens.get("input") or 0)
            attributes[n.OUTPUT_TOKENS] = int(tokens.get("output") or 0)
        cost = data.get("cost_usd")
        if isinstance(cost, int | float):
            attributes[n.COST] = float(cost)
        started = data.get("started_at")
        if isinstance(started, int | float) and started > 0:
            attributes[n.QUEUED] = round(max(0.0, state.started / NS - float(started)), 6)
        error = data.get("error")
        if error:
            attributes[n.ERROR] = self._clip(redact_text(str(error)))
        if self.config.capture_content and isinstance(data.get("reply"), str):
            attributes[n.OUTPUT_MESSAGES] = self._messages("assistant", data["reply"])
        if status == "failed" or lost:
            attributes[n.ERROR_TYPE] = reason_text or _error_type(error)
            description = f"{why}: {redact_text(str(error))}" if error else why
            span.set_status(Status(StatusCode.ERROR, self._clip(description)))
        span.set_attributes(attributes)
        span.end(end_time=now)
        finished = self.finished
        finished[state.run_id] = span.get_span_context()
        finished.move_to_end(state.run_id)
        while len(finished) > FINISHED_KEPT:
            finished.popitem(last=False)

    # -- model calls ---------------------------------------------------------------------------

    def _llm_call(self, state: RunState | None, event: Event, now: int) -> None:
        if state is None:
            return
        retry = state.llm is not None
        if retry:  # the engine calls again once after a context-length refusal
            self._end_llm(state, now, None, error="context_length", retried=True)
        elif state.reasoning is not None and state.recording:
            self._next_rstep(state, now, event.data.get("turn"))
        if not state.resolved:
            self._resolve_model(state, None)
        traced = state.recording and self._admit(state)
        attributes: Attributes = {}
        if traced:
            attributes = {
                n.OPERATION: n.CHAT,
                n.TURN: int(event.data.get("turn") or 0),
                n.MESSAGES: int(event.data.get("messages") or 0),
            }
            if state.model:
                attributes[n.REQUEST_MODEL] = state.model
            if state.provider:
                attributes[n.PROVIDER] = attributes[n.SYSTEM] = state.provider
            if state.server:
                attributes.update(state.server)
            if state.max_output:
                attributes[n.REQUEST_MAX_TOKENS] = state.max_output
            if state.compacted:
                attributes[n.COMPACTED] = True
        state.compacted = False
        state.llm = Pending(now, state.parent(), traced, attributes)

    def _delta(self, state: RunState | None, event: Event, now: int) -> None:
        pending = state.llm if state is not None else None
        if pending is None:
            return
        if not pending.chunk:
            pending.chunk = now
        if pending.traced and self.config.capture_content:
            text = event.data.get("text")
            room = self.config.max_content_chars + 256 - pending.chars  # redacted, then clipped
            if isinstance(text, str) and room > 0:
                pending.text.append(text[:room])
                pending.chars += min(len(text), room)

    def _compacted(self, state: RunState | None, event: Event, now: int) -> None:
        """The compactor shortened the view of the run's next model call."""
        if state is None:
            return
        self.metrics.compactions.add((state.agent_id,))
        state.compacted = True
        if state.span is not None and state.recording:
            attributes: Attributes = {"soulacy.event.seq": event.seq}
            for key, value in event.data.items():
                if isinstance(value, int) and not isinstance(value, bool):
                    attributes[n.TURN if key == "turn" else n.COMPACTION + key] = value
            state.span.add_event(event.type, attributes, now)

    def _llm_result(self, state: RunState | None, event: Event, now: int) -> None:
        if state is not None and state.llm is not None:
            self._end_llm(state, now, event.data)

    def _end_llm(
        self,
        state: RunState,
        now: int,
        data: Mapping[str, Any] | None,
        error: str | None = None,
        retried: bool = False,
    ) -> None:
        pending, state.llm = state.llm, None
        assert pending is not None
        metrics, provider, model = self.metrics, state.provider, state.model
        metric_attributes: Attributes = {n.OPERATION: n.CHAT}
        if provider:
            metric_attributes[n.PROVIDER] = provider
        if model:
            metric_attributes[n.REQUEST_MODEL] = model
        if pending.response_model:
            metric_attributes[n.RESPONSE_MODEL] = pending.response_model
        if state.server:
            metric_attributes.update(state.server)
        metrics.model_calls.add((state.agent_id, provider, model))
        if data is not None:
            duration_ms = data.get("duration_ms")
            seconds = (
                float(duration_ms) / 1000
                if isinstance(duration_ms, int | float)
                else (now - pending.start) / NS
            )
            input_tokens = int(data.get("input_tokens") or 0)
            output_tokens = int(data.get("output_tokens") or 0)
            # A count of 0 is taken as not reported (the conventions: report no usage rather
            # than a made-up one).
            if input_tokens:
                metrics.tokens.add((state.agent_id, provider, model, "input"), input_tokens)
                metrics.token_usage.record(
                    input_tokens, {**metric_attributes, n.TOKEN_TYPE: "input"}
                )
            if output_tokens:
                metrics.tokens.add((state.agent_id, provider, model, "output"), output_tokens)
                metrics.token_usage.record(
                    output_tokens, {**metric_attributes, n.TOKEN_TYPE: "output"}
                )
        else:
            seconds = (now - pending.start) / NS
            metric_attributes[n.ERROR_TYPE] = error or "_OTHER"
        metrics.llm_duration.record(seconds, metric_attributes)
        if not pending.traced:
            return
        self._release(state)
        attributes = pending.attributes
        if data is not None:
            attributes[n.INPUT_TOKENS] = int(data.get("input_tokens") or 0)
            attributes[n.OUTPUT_TOKENS] = int(data.get("output_tokens") or 0)
            finish = data.get("finish_reason")
            if finish:
                attributes[n.FINISH_REASONS] = [str(finish)]
            attributes[n.REPLY_TOOL_CALLS] = int(data.get("tool_calls") or 0)
        if pending.response_model:
            attributes[n.RESPONSE_MODEL] = pending.response_model
        if pending.response_id:
            attributes[n.RESPONSE_ID] = pending.response_id
        if pending.chunk:
            attributes[n.REQUEST_STREAM] = True
            attributes[n.TIME_TO_FIRST_CHUNK] = (pending.chunk - pending.start) / NS
        if pending.text and data is not None:
            # Only a streamed reply's text is in the events (text.delta); llm.call carries the
            # number of messages sent, not the messages, so there is no gen_ai.input.messages.
            finish = str(data.get("finish_reason") or "stop")
            attributes[n.OUTPUT_MESSAGES] = self._messages(
                "assistant", "".join(pending.text), finish
            )
        if retried:
            attributes[n.RETRIED] = True
        if error is not None:
            attributes[n.ERROR_TYPE] = error
        span = self._leaf(f"{n.CHAT} {state.model or 'model'}", SpanKind.CLIENT, pending)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=now)

    def _resolve_model(self, state: RunState, agent: Any) -> None:
        """The provider type, model and server of the run's agent, as the registry resolves
        them."""
        kernel = self.kernel
        state.resolved = True
        try:
            agent = agent if agent is not None else kernel.agent(state.agent_id)
            name, model = kernel.providers.model_of(agent)
        except Exception:  # no provider: the run fails on its own, and says why
            return
        state.model = model or ""
        try:
            entries = kernel.config.section("llm.providers")
            entry = entries.get(name) if isinstance(entries, Mapping) else None
            state.provider = str(getattr(entry, "type", None) or name)
        except Exception:  # another provider registry, without the llm.providers section
            state.provider = name
        if name not in self.servers:
            self.servers[name] = self._server_of(name)
        state.server = self.servers[name]

    def _server_of(self, name: str) -> Attributes:
        """``server.address`` and ``server.port`` of provider ``name``: from its ``base_url``,
        else its class's ``default_base_url`` (every provider made with
        ``soulacy.plugins.providerkit`` has one); none for a provider that names no URL
        (``scripted``)."""
        try:
            url = self.kernel.providers.config(name).base_url
            if not url:
                url = getattr(self.kernel.providers.provider(name), "default_base_url", None)
        except Exception:  # a provider that cannot be made: its run says why
            return {}
        server = server_of(url) if isinstance(url, str) else None
        if server is None:
            return {}
        address, port = server
        found: Attributes = {n.SERVER_ADDRESS: address}
        if port is not None:
            found[n.SERVER_PORT] = port
        return found

    # -- tool calls ----------------------------------------------------------------------------

    def _tool_call(self, state: RunState | None, event: Event, now: int) -> None:
        if state is None:
            return
        data = event.data
        call_id = str(data.get("id"))
        if call_id in state.tools:  # the same id again before its result: end the first
            self._end_tool(state, call_id, now, None, error="superseded")
        traced = state.recording and self._admit(state)
        attributes: Attributes = {}
        if traced:
            name = str(data.get("name"))
            attributes = {
                n.OPERATION: n.EXECUTE_TOOL,
                n.TOOL_NAME: name,
                n.TOOL_CALL_ID: call_id,
                n.TOOL_TYPE: "function",
                n.TURN: int(data.get("turn") or 0),
                n.REPLAYED: bool(data.get("replayed")),
            }
            if self.config.capture_content:
                arguments = data.get("arguments")
                rendered = json.dumps(redact(arguments), ensure_ascii=False, default=str)
                attributes[n.TOOL_ARGUMENTS] = self._clip(rendered)
        state.tools[call_id] = Pending(now, state.parent(), traced, attributes)

    def _tool_result(self, state: RunState | None, event: Event, now: int) -> None:
        if state is None:
            return
        data = event.data
        call_id = str(data.get("id"))
        name = str(data.get("name"))
        replayed = bool(data.get("replayed"))
        is_error = bool(data.get("is_error"))
        outcome = "replayed" if replayed else ("error" if is_error else "ok")
        self.metrics.tool_calls.add((state.agent_id, name, outcome))
        verdict = str(data.get("verdict") or "progress")
        if verdict != "progress":
            self.metrics.verdicts.add((state.agent_id, name, verdict))
        if call_id in state.tools:
            self._end_tool(state, call_id, now, data)

    def _end_tool(
        self,
        state: RunState,
        call_id: str,
        now: int,
        data: Mapping[str, Any] | None,
        error: str | None = None,
    ) -> None:
        pending = state.tools.pop(call_id)
        if not pending.traced:
            return
        self._release(state)
        attributes = pending.attributes
        if data is not None:
            attributes[n.VERDICT] = str(data.get("verdict") or "progress")
            attributes[n.RESULT_CHARS] = int(data.get("chars") or 0)
            if data.get("is_error"):
                error = "tool_error"
            if self.config.capture_content and isinstance(data.get("preview"), str):
                attributes[n.TOOL_RESULT] = self._clip(data["preview"])
        if error is not None:
            attributes[n.ERROR_TYPE] = error
        name = attributes.get(n.TOOL_NAME, "tool")
        span = self._leaf(f"{n.EXECUTE_TOOL} {name}", SpanKind.INTERNAL, pending)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=now)

    # -- workflow steps and reasoning steps ----------------------------------------------------

    def _step(self, state: RunState | None, event: Event, now: int) -> None:
        if state is None:
            return
        step_id = str(event.data.get("step"))
        status = str(event.data.get("status"))
        restored = bool(event.data.get("restored"))
        if status != "in_progress":
            self.metrics.steps.add((state.agent_id, "restored" if restored else status))
        if status == "in_progress":
            if step_id in state.steps:
                self._end_step(state, step_id, now, "interrupted", error="superseded")
            self._start_step(state, step_id, now)
        elif step_id in state.steps or (
            restored and self._start_step(state, step_id, now, restored=True)
        ):
            self._end_step(state, step_id, now, status)

    def _start_step(self, state: RunState, step_id: str, now: int, restored: bool = False) -> bool:
        if not state.recording or self.tracer is None or not self._admit(state):
            return False
        attributes: Attributes = {n.STEP: step_id, n.RUN_ID: state.run_id}
        if restored:
            attributes[n.RESTORED] = True
        span = self.tracer.start_span(
            f"workflow.step {step_id}",
            context=state.ctx,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=now,
        )
        context = trace_api.set_span_in_context(span)
        state.steps[step_id] = (span, context)
        state.step_ctx = context
        return True

    def _end_step(
        self, state: RunState, step_id: str, now: int, status: str, error: str | None = None
    ) -> None:
        span, context = state.steps.pop(step_id)
        if state.step_ctx is context:
            state.step_ctx = next(reversed(state.steps.values()))[1] if state.steps else None
        self._release(state)
        attributes: Attributes = {n.STEP_STATUS: status}
        if status == "failed" and error is None:
            error = "step_failed"
        if error is not None:
            attributes[n.ERROR_TYPE] = error
            span.set_status(Status(StatusCode.ERROR, error))
        span.set_attributes(attributes)
        span.end(end_time=now)

    def _next_rstep(self, state: RunState, now: int, turn: Any) -> None:
        """A reasoning strategy's step is a model call and the tool calls of its reply: a span
        from one model call to the next, parent of both."""
        assert self.tracer is not None
        self._end_rstep(state, now)
        if not self._admit(state):
            return
        state.rsteps += 1
        span = self.tracer.start_span(
            f"reasoning.step {state.rsteps}",
            context=state.ctx,
            kind=SpanKind.INTERNAL,
            attributes={
                n.REASONING: state.reasoning or "",
                n.REASONING_STEP: state.rsteps,
                n.TURN: int(turn or 0),
            },
            start_time=now,
        )
        state.rstep, state.rstep_ctx = span, trace_api.set_span_in_context(span)

    def _end_rstep(self, state: RunState, now: int) -> None:
        if state.rstep is not None:
            state.rstep.end(end_time=now)
            state.rstep = state.rstep_ctx = None
            self._release(state)

    # -- helpers -------------------------------------------------------------------------------

    def _admit(self, state: RunState) -> bool:
        """Whether one more span of ``state`` fits the bounds (counting it if so)."""
        config = self.config
        if state.created >= config.max_spans_per_run:
            reason = "max_spans_per_run"
        elif state.open >= config.max_open_spans_per_run:
            reason = "max_open_spans_per_run"
        elif self.open_total >= config.max_open_spans:
            reason = "max_open_spans"
        else:
            state.created += 1
            state.open += 1
            self.open_total += 1
            return True
        self.metrics.dropped.add((reason,))
        return False

    def _release(self, state: RunState) -> None:
        state.open -= 1
        self.open_total -= 1

    def _leaf(self, name: str, kind: SpanKind, pending: Pending) -> Span:
        assert self.tracer is not None
        return self.tracer.start_span(
            name,
            context=pending.parent,
            kind=kind,
            attributes=pending.attributes,
            start_time=pending.start,
        )

    def _agent_name(self, agent_id: str) -> str:
        try:
            name = self.kernel.agent(agent_id).section("name")
        except Exception:  # an unknown agent: its run fails on its own
            return agent_id
        return str(name) if name else agent_id

    def _messages(self, role: str, text: str, finish_reason: str | None = None) -> str:
        """One message as the GenAI conventions write ``gen_ai.{input,output}.messages`` (an
        output message of a model call says its ``finish_reason``)."""
        part = {"type": "text", "content": self._clip(redact_text(text))}
        message: dict[str, Any] = {"role": role, "parts": [part]}
        if finish_reason is not None:
            message["finish_reason"] = finish_reason
        return json.dumps([message], ensure_ascii=False)

    def _clip(self, text: str) -> str:
        limit = self.config.max_content_chars
        return text if len(text) <= limit else text[:limit] + "…"

    def close(self) -> None:
        """End every span still open (the kernel is closing with runs in progress)."""
        now = time.time_ns()
        for state in list(self.runs.values()):
            self._end_run(state, now, {}, lost="kernel_closed")


def server_of(url: str) -> Server | None:
    """``server.address`` and ``server.port`` of a base URL (the scheme's port when the URL
    names none); the user and password a URL may carry are never part of them."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        return None
    if not host:
        return None
    return host, port or DEFAULT_PORTS.get(parts.scheme.lower())


def _error_type(error: Any) -> str:
    """``Type: message`` errors (an exception's) are typed by their type; others ``failed``."""
    if isinstance(error, str):
        head, sep, _ = error.partition(":")
        if sep and head.isidentifier():
            return head
    return "failed"
