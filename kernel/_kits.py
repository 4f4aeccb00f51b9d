"""Conformance kits for swappable parts: run them against your own implementation.

Each kit is an async function that raises AssertionError naming the check that failed. The
builtin implementations pass them in Soulacy's own suite.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._contracts import ContextOverflow
from ._messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from ._store_kit import (
    CHECKPOINT_CHECKS,
    StoreFactory,
    _checkpoint_failures_raise,
    expect,
    expect_that,
    run_checks,
)
from .policy import ModelCapacity


def _named(name: str, check: Callable[[], Any]) -> Any:
    try:
        return check()
    except AssertionError as exc:
        raise AssertionError(f"{name}: {exc}") from exc
    except Exception as exc:
        raise AssertionError(
            f"{name}: a call: expected no exception, got {type(exc).__name__}: {exc}"
        ) from exc


# -- checkpoint stores --------------------------------------------------------------------------


async def check_checkpoint_store(
    factory: StoreFactory, *, failing: StoreFactory | None = None
) -> None:
    """The checkpoint part of :func:`check_store`: checkpoints (order, upsert, legacy identity,
    discard) and plugin state, each on a fresh store. ``check_store`` runs these checks too,
    with those of every other role of the store (leases, fencing, runs …).

    ``failing``, when given, makes a store whose storage fails on every call: each call must
    raise StorageError (a failed read of checkpoints is never an empty list)."""
    await run_checks("checkpoint store", factory, CHECKPOINT_CHECKS)
    if failing is not None:
        await run_checks("checkpoint store", failing, (_checkpoint_failures_raise,))


# -- progress detectors --------------------------------------------------------------------------

VERDICTS = ("progress", "repeated", "stalled")


def _feed(
    detector: Any,
    results: Sequence[Any],
    *,
    arguments: str = "vary",
    tool: str = "t",
    is_error: bool = False,
) -> list[str]:
    """Feed results to a detector, the arguments varying or the same every time."""
    kinds = []
    for n, result in enumerate(results):
        args = {"n": n} if arguments == "vary" else {"n": 0}
        verdict = detector.observe(tool, args, result, is_error)
        expect_that(
            getattr(verdict, "kind", None) in VERDICTS,
            f"the verdict of result {n + 1}",
            f"a Verdict whose kind is one of {VERDICTS}",
            verdict,
        )
        kinds.append(verdict.kind)
    return kinds


def check_progress_detector(make: Callable[[int | None], Any]) -> None:
    """``make(limit)`` returns a fresh detector; ``None`` disables stalling.

    ``limit`` identical results stall, one fewer does not, whether the calls repeat exactly
    or only their arguments change; a fresh result resets the count; alternating tools that
    return old evidence stall; so do identical errors; detectors share nothing; ``None``
    never stalls, whatever is fed."""

    def limit_identical() -> None:
        for limit in (2, 5, 9):
            for arguments in ("vary", "same"):
                how = f"limit {limit}, arguments {'varying' if arguments == 'vary' else 'the same'}"
                kinds = _feed(make(limit), ["same"] * limit, arguments=arguments)
                expect(kinds[-1], "stalled", f"{how}: the verdict of result {limit} of {limit}")
                fewer = _feed(make(limit), ["same"] * (limit - 1), arguments=arguments)
                expect_that(
                    "stalled" not in fewer,
                    f"{how}: {limit - 1} identical results (one fewer than the limit)",
                    "no 'stalled' verdict",
                    fewer,
                )

    def fresh_resets() -> None:
        for arguments in ("vary", "same"):
            kinds = _feed(make(5), ["same"] * 4 + ["fresh"] + ["same"] * 3, arguments=arguments)
            expect_that(
                "stalled" not in kinds,
                "4 identical results, a fresh one, 3 identical ones (limit 5)",
                "no 'stalled' verdict: a fresh result resets the count",
                kinds,
            )
        kinds = _feed(make(5), [f"r{n}" for n in range(50)], arguments="same")
        expect_that(
            "stalled" not in kinds,
            "50 different results of the same call (limit 5)",
            "no 'stalled' verdict: every result is fresh",
            kinds,
        )

    def arguments_alone() -> None:
        detector = make(3)
        kinds = [detector.observe("t", {"q": n}, "same answer", False).kind for n in range(3)]
        expect(kinds[-1], "stalled", "changing the arguments alone is not progress (limit 3)")

    def alternation() -> None:
        detector = make(6)
        kinds = [
            detector.observe(tool, {"n": n}, tool, False).kind
            for n, tool in enumerate(["A", "B"] * 5)
        ]
        expect_that(
            "stalled" in kinds,
            "two tools alternating, each returning its old evidence (limit 6)",
            "a 'stalled' verdict",
            kinds,
        )

    def errors() -> None:
        kinds = _feed(make(4), ["error: disk full"] * 4, is_error=True)
        expect(kinds[-1], "stalled", "the same error 4 times (limit 4)")

    def independent() -> None:
        first, second = make(5), make(5)
        kinds = []
        for n in range(4):
            kinds.append(first.observe("t", {"n": n}, "same", False).kind)
            kinds.append(second.observe("t", {"n": n}, "same", False).kind)
        expect_that(
            "stalled" not in kinds,
            "two detectors of limit 5 fed 4 identical results each",
            "no 'stalled' verdict: each detector counts its own run",
            kinds,
        )
        expect(first.observe("t", {"n": 4}, "same", False).kind, "stalled", "the 5th of one")

    def disabled() -> None:
        for arguments in ("vary", "same"):
            kinds = _feed(make(None), ["same"] * 200, arguments=arguments)
            expect_that(
                "stalled" not in kinds,
                f"200 identical results, arguments {arguments}, limit None",
                "no 'stalled' verdict: None never stalls",
                kinds,
            )
        kinds = _feed(make(None), ["error"] * 50, is_error=True)
        expect_that(
            "stalled" not in kinds, "50 identical errors, limit None", "no 'stalled'", kinds
        )
        detector = make(None)
        kinds = [detector.observe(t, {}, t, False).kind for t in ["A", "B"] * 50]
        expect_that(
            "stalled" not in kinds, "100 alternating results, limit None", "no 'stalled'", kinds
        )

    for name, check in (
        ("limit", limit_identical),
        ("fresh", fresh_resets),
        ("arguments", arguments_alone),
        ("alternation", alternation),
        ("errors", errors),
        ("independent", independent),
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
            expect_that(
                m.tool_call_id in calls,
                f"the call of tool result {m.tool_call_id!r} in the view",
                "the assistant message that made the call, kept with its result",
                sorted(calls),
            )
    results = {m.tool_call_id for m in view if m.role == "tool"}
    for m in view:
        for c in m.tool_calls if m.role == "assistant" else ():
            expect_that(
                c.id in results,
                f"the result of tool call {c.id!r} in the view",
                "the tool result, kept with its call",
                sorted(str(r) for r in results),
            )


def check_compactor(make: Callable[[], Any]) -> None:
    """``make()`` returns a fresh compactor (what ``soulacy_make_compactor`` returns)."""
    tools = [ToolSpec("step", "a step", {"type": "object", "properties": {}})]

    def unchanged() -> None:
        messages = _history(5)
        expect(list(make().compact(messages, None, tools)), messages, "no allowance: the view")
        expect(list(make().compact(messages, 10**9, tools)), messages, "under it: the view")

    def keeps_what_matters() -> None:
        messages = _history(400)
        before = copy.deepcopy(messages)
        view = list(make().compact(messages, 4000, tools))
        expect(messages, before, "the original messages after compacting (never changed)")
        expect_that(
            len(view) < len(messages),
            "the view's length over the allowance",
            f"fewer than the {len(messages)} messages",
            len(view),
        )
        expect(view[0], messages[0], "the view's first message (the system instructions)")
        expect_that(
            any(m.content == "GOAL: count to 10" for m in view),
            "the goal in the view",
            "the first user message kept",
            [m.content[:40] for m in view[:5]],
        )
        expect(view[-1], messages[-1], "the view's last message (the latest request)")
        expect_that(
            messages[-2] in view,
            "the most recent tool result in the view",
            "the most recent tool exchange kept whole",
            view[-3:],
        )
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
        cut = [m for m in view if m.role == "tool"]
        expect(len(cut), 1, "the tool results in the view of one oversized result")
        expect_that(
            0 < len(cut[0].content) < len(messages[3].content),
            "the length of an oversized result in the view",
            f"cut: more than 0 and fewer than {len(messages[3].content)} characters",
            len(cut[0].content),
        )
        expect(cut[0].meta.get("truncated"), True, "a cut result's meta['truncated']")

    def overflow() -> None:
        messages = [Message("system", "rule " * 50_000), Message("user", "hi")]
        try:
            view = make().compact(messages, 1000, tools)
        except ContextOverflow:
            return
        raise AssertionError(
            "system instructions over the allowance: expected ContextOverflow,"
            f" got a view of {len(list(view))} messages"
        )

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
    expect_that(
        capacity is None or isinstance(capacity, ModelCapacity),
        "provider check capacity(None)",
        "None or a ModelCapacity",
        capacity,
    )
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
    if not isinstance(reply, ModelReply):
        raise AssertionError(
            f"provider check complete(): expected a ModelReply, got {type(reply).__name__}"
        )
    expect(reply.message.role, "assistant", "provider check: the reply message's role")
    usage = (reply.usage.input_tokens, reply.usage.output_tokens)
    expect_that(
        all(isinstance(n, int) and n >= 0 for n in usage),
        "provider check: the reply's usage (input_tokens, output_tokens)",
        "whole numbers of tokens, 0 or more",
        usage,
    )
    names = {t.name for t in tools}
    for call in reply.message.tool_calls:
        expect_that(bool(call.id), "provider check: a tool call's id", "an id", call)
        expect_that(
            call.name in names,
            "provider check: a tool call's name",
            f"one of the offered tools {sorted(names)}",
            call.name,
        )
        expect_that(
            isinstance(call.arguments, Mapping),
            "provider check: a tool call's arguments",
            "a mapping",
            call.arguments,
        )
    if stream and deltas:
        expect(
            "".join(deltas),
            reply.message.content,
            "provider check: the streamed text (it adds up to the reply)",
        )
    close = provider.aclose()
    if inspect.isawaitable(close):
        await close
    return reply


# -- transports ---------------------------------------------------------------------------------
