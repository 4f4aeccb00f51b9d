"""Conformance kits for swappable parts: run them against your own implementation.

Each kit is an async function that raises AssertionError naming the check that failed. The
builtin implementations pass them in Soulacy's own suite.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from ._contracts import ContextOverflow
from ._messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from ._store import Checkpoint, ClaimOwner
from ._store_kit import _close, _make
from .policy import ModelCapacity


def _named(name: str, check: Callable[[], Any]) -> Any:
    try:
        return check()
    except AssertionError as exc:
        raise AssertionError(f"{name}: {exc}") from exc


def _dead_pid() -> int:
    """A pid that certainly belonged to a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# -- checkpoint stores --------------------------------------------------------------------------


async def check_checkpoint_store(factory: Callable[[], Any]) -> None:
    """Checkpoints (order, upsert, legacy identity, discard), claims (exclusive, reentrant,
    takeover only from a provably gone owner) and plugin state, each on a fresh store."""
    checks = (_checkpoints, _claims, _state)
    for check in checks:
        store = await _make(factory)
        try:
            await check(store)
        except AssertionError as exc:
            raise AssertionError(
                f"checkpoint store check {check.__name__.strip('_')}: {exc}"
            ) from exc
        finally:
            await _close(store)


async def _checkpoints(store: Any) -> None:
    identity = {"user_id": "u", "session_id": "s"}
    await store.save_checkpoint(Checkpoint("r", "a", "in_progress", "ag", None, identity))
    await store.save_checkpoint(Checkpoint("r", "b", "completed", "ag", {"result": 2}, identity))
    await store.save_checkpoint(Checkpoint("r", "a", "completed", "ag", {"result": 1}, identity))
    await store.save_checkpoint(Checkpoint("legacy", "x", "completed", "ag", {"result": 0}, None))
    saved = await store.load_checkpoints("r")
    assert [(c.step_id, c.status) for c in saved] == [("a", "completed"), ("b", "completed")], (
        "steps keep the order they were first saved in; a save replaces the step's state"
    )
    assert saved[0].evidence == {"result": 1}
    assert saved[0].identity == identity
    (legacy,) = await store.load_checkpoints("legacy")
    assert legacy.identity is None, "a checkpoint without identity stays without identity"
    assert await store.load_checkpoints("none") == []
    assert await store.discard_checkpoints("r", "a") == 1
    assert [c.step_id for c in await store.load_checkpoints("r")] == ["b"]
    assert await store.discard_checkpoints("r") == 1
    assert await store.load_checkpoints("r") == []


async def _claims(store: Any) -> None:
    me = ClaimOwner("kernel-1", os.getpid(), ClaimOwner.current("x").host)
    other = ClaimOwner("kernel-2", os.getpid(), me.host)  # alive: this very process
    first = await store.try_claim("k", me)
    assert first.acquired
    assert first.took_over_from is None
    assert (await store.try_claim("k", me)).acquired, "a claim is reentrant for its owner"
    refused = await store.try_claim("k", other)
    assert not refused.acquired, "a live owner's claim is exclusive"
    assert refused.holder == me
    assert await store.claim_holder("k") == me
    await store.release_claim("k", other)  # not the holder: no effect
    assert await store.claim_holder("k") == me
    await store.release_claim("k", me)
    assert await store.claim_holder("k") is None
    gone = ClaimOwner("kernel-gone", _dead_pid(), me.host)
    assert (await store.try_claim("j", gone)).acquired
    taken = await store.try_claim("j", me)
    assert taken.acquired, "a claim of a provably gone owner is taken over"
    assert taken.took_over_from == gone, "a takeover says whose claim it took"
    elsewhere = ClaimOwner("kernel-far", 1, "another-host.invalid")
    await store.release_claim("j", me)
    assert (await store.try_claim("i", elsewhere)).acquired
    assert not (await store.try_claim("i", me)).acquired, (
        "another host's owner cannot be proven gone: its claim stays"
    )


async def _state(store: Any) -> None:
    assert await store.load_state("missing") is None
    await store.save_state("s", {"last_tick": "2026-01-01T00:00:00+00:00", "n": 3})
    await store.save_state("s", {"last_tick": "2026-01-02T00:00:00+00:00", "n": 4})
    assert await store.load_state("s") == {"last_tick": "2026-01-02T00:00:00+00:00", "n": 4}


# -- progress detectors --------------------------------------------------------------------------


def check_progress_detector(make: Callable[[int | None], Any]) -> None:
    """``make(limit)`` returns a fresh detector; ``None`` disables stalling."""
    verdicts = {"progress", "repeated", "stalled"}

    def feed(detector: Any, results: Sequence[Any], tool: str = "t") -> list[str]:
        kinds = []
        for n, result in enumerate(results):
            verdict = detector.observe(tool, {"n": n}, result, False)
            assert verdict.kind in verdicts, f"unknown verdict {verdict.kind!r}"
            kinds.append(verdict.kind)
        return kinds

    def limit_identical() -> None:
        assert feed(make(5), ["same"] * 5)[-1] == "stalled", "limit identical results stall"
        assert "stalled" not in feed(make(5), ["same"] * 4), "one fewer does not"

    def fresh_resets() -> None:
        kinds = feed(make(5), ["same"] * 4 + ["fresh"] + ["same"] * 3)
        assert "stalled" not in kinds, "a fresh result resets the count"

    def arguments_alone() -> None:
        detector = make(3)
        kinds = [detector.observe("t", {"q": n}, "same answer", False).kind for n in range(3)]
        assert kinds[-1] == "stalled", "changing the arguments alone is not progress"

    def alternation() -> None:
        kinds = feed(make(6), ["A", "B"] * 5)
        assert "stalled" in kinds, "alternating tools returning old evidence stall too"

    def disabled() -> None:
        assert "stalled" not in feed(make(None), ["same"] * 200), "None never stalls"

    for name, check in (
        ("limit", limit_identical),
        ("fresh", fresh_resets),
        ("arguments", arguments_alone),
        ("alternation", alternation),
        ("disabled", disabled),
    ):
        _named(f"progress detector check {name}", check)


# -- compactors ---------------------------------------------------------------------------------


def _history(turns: int, result_chars: int = 400) -> list[Message]:
    messages = [Message("system", "You are careful."), Message("user", "GOAL: count to 10")]
    for n in range(turns):
        call = ToolCall(f"c{n}", "step", {"i": n})
        messages.append(Message("assistant", "", (call,)))
        messages.append(
            Message("tool", f"ok-{n} " + "x" * result_chars, tool_call_id=f"c{n}", name="step")
        )
    messages.append(Message("user", "LATEST: and now?"))
    return messages


def _pairs_intact(view: Sequence[Message]) -> None:
    calls = {c.id for m in view if m.role == "assistant" for c in m.tool_calls}
    for m in view:
        if m.role == "tool":
            assert m.tool_call_id in calls, f"tool result {m.tool_call_id} lost its call"
    results = {m.tool_call_id for m in view if m.role == "tool"}
    for m in view:
        for c in m.tool_calls if m.role == "assistant" else ():
            assert c.id in results, f"tool call {c.id} lost its result"


def check_compactor(make: Callable[[], Any]) -> None:
    """``make()`` returns a fresh compactor (what ``soulacy_make_compactor`` returns)."""
    tools = [ToolSpec("step", "a step", {"type": "object", "properties": {}})]

    def unchanged() -> None:
        messages = _history(5)
        assert list(make().compact(messages, None, tools)) == messages, "no allowance: as is"
        assert list(make().compact(messages, 10**9, tools)) == messages, "under: as is"

    def keeps_what_matters() -> None:
        messages = _history(400)
        before = copy.deepcopy(messages)
        view = list(make().compact(messages, 4000, tools))
        assert messages == before, "the original messages are never changed"
        assert len(view) < len(messages), "over the allowance the view is smaller"
        assert view[0] == messages[0], "the system instructions are kept"
        assert any(m.content == "GOAL: count to 10" for m in view), "the goal is kept"
        assert view[-1] == messages[-1], "the latest request is kept"
        assert messages[-2] in view, "the most recent tool exchange is kept whole"
        _pairs_intact(view)

    def oversized_result() -> None:
        messages = [
            Message("system", "s"),
            Message("user", "read it"),
            Message("assistant", "", (ToolCall("big", "read", {}),)),
            Message("tool", "line\n" * 200_000, tool_call_id="big", name="read"),
            Message("user", "go on"),
        ]
        view = list(make().compact(messages, 2000, tools))
        (cut,) = [m for m in view if m.role == "tool"]
        assert 0 < len(cut.content) < len(messages[3].content), "an oversized result is cut"
        assert cut.meta.get("truncated") is True, "and carries truncated: True"

    def overflow() -> None:
        messages = [Message("system", "rule " * 50_000), Message("user", "hi")]
        try:
            make().compact(messages, 1000, tools)
        except ContextOverflow:
            return
        raise AssertionError("system instructions over the allowance raise ContextOverflow")

    for name, check in (
        ("unchanged", unchanged),
        ("keeps", keeps_what_matters),
        ("oversized", oversized_result),
        ("overflow", overflow),
    ):
        _named(f"compactor check {name}", check)


# -- providers ----------------------------------------------------------------------------------


async def check_provider(
    provider: Any, *, tools: Sequence[ToolSpec] = (), stream: bool = True
) -> ModelReply:
    """One real call through ``provider`` (set up by you to answer), checking the reply's
    shape: an assistant message, usage in whole tokens, tool calls with ids and known names,
    and streamed text that adds up to the reply. Returns the reply."""
    capacity = provider.capacity(None)
    assert capacity is None or isinstance(capacity, ModelCapacity), "capacity() type"
    deltas: list[str] = []

    async def sink(text: str) -> None:
        deltas.append(text)

    request = ModelRequest(
        [Message("system", "Be brief."), Message("user", "hi")],
        tools,
        max_output_tokens=64,
        stream=stream,
    )
    reply = await provider.complete(request, sink if stream else None)
    assert isinstance(reply, ModelReply), "complete() returns a ModelReply"
    assert reply.message.role == "assistant", "the reply is an assistant message"
    assert reply.usage.input_tokens >= 0
    assert reply.usage.output_tokens >= 0
    names = {t.name for t in tools}
    for call in reply.message.tool_calls:
        assert call.id, "every tool call has an id"
        assert call.name in names, f"tool call {call.name!r} names no offered tool"
        assert isinstance(call.arguments, Mapping), "arguments are a mapping"
    if stream and deltas:
        assert "".join(deltas) == reply.message.content, "streamed text adds up to the reply"
    close = provider.aclose()
    if inspect.isawaitable(close):
        await close
    return reply


# -- transports ---------------------------------------------------------------------------------


async def check_transport(
    base_url: str, agent_id: str, headers: Mapping[str, str] | None = None
) -> None:
    """The HTTP/SSE contract of ``/api/v1`` against a running server whose ``agent_id``
    answers with text: JSON chat with metadata, SSE with ids and a final ``result``, resume
    with Last-Event-ID, 404 for unknown runs."""
    async with httpx.AsyncClient(
        base_url=base_url.rstrip("/") + "/api/v1", headers=dict(headers or {}), timeout=120
    ) as client:
        assert (await client.get("/health")).status_code == 200, "GET /health"
        chat = await client.post("/chat", json={"agent_id": agent_id, "text": "hi"})
        assert chat.status_code == 200, f"POST /chat: {chat.status_code} {chat.text}"
        body = chat.json()
        for key in ("reply", "run_id", "session_id", "status", "verification", "metadata"):
            assert key in body, f"POST /chat answers {key}"
        stream = await client.post("/chat/stream", json={"agent_id": agent_id, "text": "hi"})
        events = _sse(stream.text)
        assert events, "POST /chat/stream sends events"
        assert all(e.get("id") for e in events), "every SSE event has an id"
        assert events[-1]["event"] == "result", "the stream ends with a result event"
        result = json.loads(events[-1]["data"])
        for key in ("reply", "run_id", "session_id", "status", "metadata"):
            assert key in result, f"the result event carries {key}"
        again = await client.get(
            f"/runs/{result['run_id']}/events", headers={"Last-Event-ID": events[0]["id"]}
        )
        assert [e["id"] for e in _sse(again.text)] == [e["id"] for e in events[1:]], (
            "reconnecting with Last-Event-ID delivers each missed event once"
        )
        assert (await client.get("/runs/no-such-run")).status_code == 404, "unknown run: 404"


def _sse(text: str) -> list[dict[str, str]]:
    events = []
    for block in text.strip().split("\n\n"):
        event = {}
        for line in block.splitlines():
            if not line.startswith(":"):
                key, _, value = line.partition(": ")
                event[key] = value
        if "event" in event:
            events.append(event)
    return events
