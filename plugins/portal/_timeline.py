"""What happened in one run, step by step, for the portal's run timeline.

The run's stored SSE events say its tool calls but not its model calls or compactions, so while
the portal is served it observes each run's events itself (those below, never a text delta):
kept in memory while the run goes on (the timeline is live), then written once, when the run
ends, as a small state of the store (``portal.timeline:RUN_ID``, deleted with its run), so that
a later ``GET /api/v1/runs/{run_id}/timeline`` — from this process or another on the same
store — shows it complete. Arguments and results are redacted (as events are) and excerpted.
A run continued in place (its next attempt, same run id) keeps the earlier attempts' steps
before its own. Keeping never fails a run: a store that refuses is a logged warning.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import Event, Kernel, StashKey, redact, redact_text
from soulacy.kernel.contracts import RunParticipant

if TYPE_CHECKING:
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ModelReply

log = logging.getLogger("soulacy.portal")
PREFIX = "portal.timeline:"
TYPES = (
    *("run.started", "run.limits", "llm.call", "llm.result", "tool.call", "tool.result"),
    *("tool.approval", "context.compacted", "workflow.step", "run.completed"),
)
MAX_ENTRIES = 400  # per run: a longer run keeps its first ones and says how many were left out
EXCERPT = 300  # characters of an argument list or a result
MAX_LIVE = 200  # runs followed at once; more (a flood) are not followed
KEY = StashKey["Timelines"]("portal timelines")


def state_key(run_id: str) -> str:
    return PREFIX + run_id


def excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(redact(value), default=str)
    text = redact_text(text)
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"


def entry(event: Event) -> dict[str, Any] | None:
    """What the timeline keeps of one event (None: nothing)."""
    data, kind = event.data, event.type
    if kind == "run.started":
        asked = data.get("text")
        return {
            "kind": "started",
            "agent_id": data.get("agent_id"),
            "text": excerpt(asked) if isinstance(asked, str) and asked else None,
        }
    if kind == "run.limits":
        shown = {
            name: ("unlimited" if limit.get("unlimited") else limit.get("text", limit.get("value")))
            for name, limit in data.items()
            if isinstance(limit, dict)
        }
        return {"kind": "limits", "limits": shown}
    if kind == "llm.call":
        return {"kind": "model_call", "turn": data.get("turn"), "messages": data.get("messages")}
    if kind == "llm.result":
        keys = ("turn", "input_tokens", "output_tokens", "duration_ms", "finish_reason")
        return {
            "kind": "model_reply",
            **{k: data.get(k) for k in keys},
            "tools": data.get("tool_calls"),
        }  # with the call's price, model and provider (:class:`CallPrices`), when known
    if kind == "tool.call":
        return {
            "kind": "tool_call",
            "turn": data.get("turn"),
            "id": data.get("id"),
            "name": data.get("name"),
            "arguments": excerpt(data.get("arguments") or {}),
        }
    if kind == "tool.result":
        return {
            "kind": "tool_result",
            "id": data.get("id"),
            "name": data.get("name"),
            "is_error": bool(data.get("is_error")),
            "verdict": data.get("verdict"),
            "chars": data.get("chars"),
            "result": excerpt(data.get("preview") or ""),
        }
    if kind == "tool.approval":
        keys = ("id", "name", "status", "approver", "note")
        return {"kind": "approval", **{k: data.get(k) for k in keys}}
    if kind == "context.compacted":
        return {"kind": "compaction", **{k: v for k, v in data.items() if k != "kind"}}
    if kind == "workflow.step":
        return {"kind": "step", "step": data.get("step"), "status": data.get("status")}
    if kind == "run.completed":
        ended = ("status", "verification", "incomplete_reason", "error", "evidence", "cost_usd")
        return {"kind": "ended", **{k: data.get(k) for k in ended}, "tokens": data.get("tokens")}
    return None


@attrs.define
class Timeline:
    entries: list[dict[str, Any]] = attrs.Factory(list)
    left_out: int = 0

    def add(self, found: dict[str, Any]) -> None:
        if len(self.entries) < MAX_ENTRIES or found["kind"] == "ended":
            self.entries.append(found)
        else:
            self.left_out += 1

    def to_dict(self) -> dict[str, Any]:
        return {"entries": list(self.entries), "left_out": self.left_out}

    @classmethod
    def after(cls, earlier: Mapping[str, Any] | None, later: Timeline) -> Timeline:
        """The steps of ``earlier`` attempts of a run (as stored), then those of ``later``."""
        if not earlier:
            return later
        merged = cls(list(earlier.get("entries") or []), int(earlier.get("left_out") or 0))
        for found in later.entries:
            merged.add(found)
        merged.left_out += later.left_out
        return merged


@attrs.define
class Timelines:
    """The timelines of the runs going on in this process, by run id; the price of each
    run's model call just made, until its ``llm.result`` takes it."""

    live: dict[str, Timeline] = attrs.Factory(dict)
    priced: dict[str, dict[str, Any]] = attrs.Factory(dict)


class CallPrices(RunParticipant):
    """Takes part in a run's model calls while the portal is served and calls have a price:
    after each call, its price (as the ``costs`` plugin adds it to the run's cost, through
    ``soulacy_price``), model and provider, for the timeline's entry of the call. The engine
    calls participants before it emits ``llm.result``: the entry takes them there."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        timelines = self.kernel.stash.get(KEY, None)
        if timelines is None or run.run_id not in timelines.live:
            return
        price = self.kernel.hook.soulacy_price(
            kernel=self.kernel, provider=provider, model=model, usage=reply.usage
        )
        timelines.priced[run.run_id] = {
            "cost_usd": None if price is None else float(price),
            "model": model,
            "provider": provider,
        }


def participants(kernel: Kernel) -> list[RunParticipant] | None:
    """A run's :class:`CallPrices`, when the portal is served and some plugin prices calls
    (the ``costs`` plugin with ``costs.pricing``, or another): else nothing takes part."""
    if KEY not in kernel.stash or "http" not in kernel.started:
        return None
    hooks = kernel.hook.soulacy_price.get_hookimpls()
    if not hooks:
        return None
    if len(hooks) == 1 and not kernel.config.section("costs").pricing:
        return None  # only the costs plugin's, and no price metadata: every call costs None
    return [CallPrices(kernel)]


def asked(kernel: Kernel, run_id: str) -> str | None:
    """What the person asked, for a run going on in this process (else None)."""
    live = kernel.stash[KEY].live.get(run_id) if KEY in kernel.stash else None
    for found in live.entries if live is not None else ():
        if found["kind"] == "started":
            text = found.get("text")
            return text if isinstance(text, str) else None
    return None


def serve(kernel: Kernel) -> None:
    """From now on, keep each run's timeline: the portal is served."""
    if KEY not in kernel.stash:
        kernel.stash[KEY] = Timelines()
        kernel.events.observe(lambda event: observe(kernel, event), TYPES)


def observe(kernel: Kernel, event: Event) -> Awaitable[None] | None:
    if event.run_id is None or "http" not in kernel.started:  # not served (`soulacy run`)
        return None
    found = entry(event)
    if found is None:
        return None
    found["at"] = round(time.time(), 3)
    timelines = kernel.stash[KEY]
    if found["kind"] == "model_reply":
        found.update(timelines.priced.pop(event.run_id, {}))
    live = timelines.live
    timeline = live.get(event.run_id)
    if timeline is None:
        if len(live) >= MAX_LIVE:
            return None
        timeline = live[event.run_id] = Timeline()
    timeline.add(found)
    if found["kind"] != "ended":
        return None
    del live[event.run_id]
    timelines.priced.pop(event.run_id, None)
    return _save(kernel, event.run_id, timeline)


async def _save(kernel: Kernel, run_id: str, timeline: Timeline) -> None:
    try:
        earlier = await kernel.store().load_state(state_key(run_id))  # a continued run's
        whole = Timeline.after(earlier, timeline)
        await kernel.store().save_state(state_key(run_id), whole.to_dict(), run_id=run_id)
    except Exception as exc:  # the page shows what the run's record says; the run goes on
        log.warning("could not keep the timeline of run %s for the portal: %s", run_id, exc)


async def load(kernel: Kernel, run_id: str) -> tuple[dict[str, Any] | None, bool]:
    """The run's timeline and whether it is live (going on in this process); None when not
    kept (a run from before the portal was served, or one whose write failed)."""
    live = kernel.stash[KEY].live.get(run_id) if KEY in kernel.stash else None
    state = await kernel.store().load_state(state_key(run_id))
    if live is not None:  # after the earlier attempts' steps, when it was continued
        return Timeline.after(state, live).to_dict(), True
    return (dict(state) if state else None), False
