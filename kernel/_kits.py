"""Conformance kits for swappable parts: run them against your own implementation.

Each kit is a function that raises AssertionError naming the check that failed. A kit of
several checks runs them all, or those its ``only=`` names (one name or several, of its
``*_CHECK_NAMES``): each check can run alone. The builtin implementations pass them in
Soulacy's own suite.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._contracts import ContextOverflow
from ._messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec
from ._store_kit import (
    CHECKPOINT_CHECKS,
    StoreFactory,
    _checkpoint_failures_raise,
    check_name,
    expect,
    expect_that,
    run_checks,
    select_checks,
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


CHECKPOINT_FAILURES_RAISE = check_name(_checkpoint_failures_raise)  # the ``failing`` check
CHECKPOINT_CHECK_NAMES: tuple[str, ...] = (
    *map(check_name, CHECKPOINT_CHECKS),
    CHECKPOINT_FAILURES_RAISE,
)


async def check_checkpoint_store(
    factory: StoreFactory,
    *,
    failing: StoreFactory | None = None,
    only: str | Iterable[str] | None = None,
) -> None:
    """The checkpoint part of :func:`check_store`: checkpoints (order, upsert, legacy identity,
    discard) and plugin state, each on a fresh store. ``check_store`` runs these checks too,
    with those of every other role of the store (leases, fencing, runs …).

    ``failing``, when given, makes a store whose storage fails on every call: each call must
    raise StorageError (a failed read of checkpoints is never an empty list; the check
    ``checkpoint_failures_raise``). ``only`` runs the checks it names, of
    :data:`CHECKPOINT_CHECK_NAMES`, and no other; an unknown name, or
    ``checkpoint_failures_raise`` without ``failing``, is a ValueError."""
    selected = select_checks("checkpoint store", CHECKPOINT_CHECK_NAMES, only)
    if only is not None and CHECKPOINT_FAILURES_RAISE in selected and failing is None:
        raise ValueError(
            f"checkpoint store kit: the check {CHECKPOINT_FAILURES_RAISE} needs failing= (a"
            " factory of a store whose storage fails on every call)"
        )
    checks = [c for c in CHECKPOINT_CHECKS if check_name(c) in selected]
    await run_checks("checkpoint store", factory, checks)
    if failing is not None and CHECKPOINT_FAILURES_RAISE in selected:
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


Detector = Callable[[int | None], Any]  # make(limit): a fresh progress detector


def _limit_identical(make: Detector) -> None:
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


def _fresh_resets(make: Detector) -> None:
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


def _arguments_alone(make: Detector) -> None:
    detector = make(3)
    kinds = [detector.observe("t", {"q": n}, "same answer", False).kind for n in range(3)]
    expect(kinds[-1], "stalled", "changing the arguments alone is not progress (limit 3)")


def _alternation(make: Detector) -> None:
    detector = make(6)
    kinds = [
        detector.observe(tool, {"n": n}, tool, False).kind for n, tool in enumerate(["A", "B"] * 5)
    ]
    expect_that(
        "stalled" in kinds,
        "two tools alternating, each returning its old evidence (limit 6)",
        "a 'stalled' verdict",
        kinds,
    )


def _errors(make: Detector) -> None:
    kinds = _feed(make(4), ["error: disk full"] * 4, is_error=True)
    expect(kinds[-1], "stalled", "the same error 4 times (limit 4)")


def _independent(make: Detector) -> None:
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


def _disabled(make: Detector) -> None:
    for arguments in ("vary", "same"):
        kinds = _feed(make(None), ["same"] * 200, arguments=arguments)
        expect_that(
            "stalled" not in kinds,
            f"200 identical results, arguments {arguments}, limit None",
            "no 'stalled' verdict: None never stalls",
            kinds,
        )
    kinds = _feed(make(None), ["error"] * 50, is_error=True)
    expect_that("stalled" not in kinds, "50 identical errors, limit None", "no 'stalled'", kinds)
    detector = make(None)
    kinds = [detector.observe(t, {}, t, False).kind for t in ["A", "B"] * 50]
    expect_that(
        "stalled" not in kinds, "100 alternating results, limit None", "no 'stalled'", kinds
    )


PROGRESS_CHECKS: tuple[tuple[str, Callable[[Detector], None]], ...] = (
    ("limit", _limit_identical),
    ("fresh", _fresh_resets),
    ("arguments", _arguments_alone),
    ("alternation", _alternation),
    ("errors", _errors),
    ("independent", _independent),
    ("disabled", _disabled),
)
PROGRESS_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in PROGRESS_CHECKS)


def check_progress_detector(make: Detector, *, only: str | Iterable[str] | None = None) -> None:
    """``make(limit)`` returns a fresh detector; ``None`` disables stalling.

    ``limit`` identical results stall, one fewer does not, whether the calls repeat exactly
    or only their arguments change; a fresh result resets the count; alternating tools that
    return old evidence stall; so do identical errors; detectors share nothing; ``None``
    never stalls, whatever is fed. ``only`` runs the checks it names, of
    :data:`PROGRESS_CHECK_NAMES`, and no other (an unknown name is a ValueError)."""
    selected = select_checks("progress detector", PROGRESS_CHECK_NAMES, only)
    for name, check in PROGRESS_CHECKS:
        if name in selected:
            _named(f"progress detector check {name}", functools.partial(check, make))


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


Compactor = Callable[[], Any]  # make(): a fresh compactor
_TOOLS = (ToolSpec("step", "a step", {"type": "object", "properties": {}}),)


def _unchanged(make: Compactor) -> None:
    messages = _history(5)
    expect(list(make().compact(messages, None, _TOOLS)), messages, "no allowance: the view")
    expect(list(make().compact(messages, 10**9, _TOOLS)), messages, "under it: the view")


def _keeps_what_matters(make: Compactor) -> None:
    messages = _history(400)
    before = copy.deepcopy(messages)
    view = list(make().compact(messages, 4000, _TOOLS))
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


def _oversized_result(make: Compactor) -> None:
    messages = [
        Message("system", "s"),
        Message("user", "read it"),
        Message("assistant", "", (ToolCall("big", "read", {}),)),
        Message("tool", "line\n" * 200_000, tool_call_id="big", name="read"),
        Message("user", "go on"),
    ]
    view = list(make().compact(messages, 2000, _TOOLS))
    cut = [m for m in view if m.role == "tool"]
    expect(len(cut), 1, "the tool results in the view of one oversized result")
    expect_that(
        0 < len(cut[0].content) < len(messages[3].content),
        "the length of an oversized result in the view",
        f"cut: more than 0 and fewer than {len(messages[3].content)} characters",
        len(cut[0].content),
    )
    expect(cut[0].meta.get("truncated"), True, "a cut result's meta['truncated']")


def _overflow(make: Compactor) -> None:
    messages = [Message("system", "rule " * 50_000), Message("user", "hi")]
    try:
        view = make().compact(messages, 1000, _TOOLS)
    except ContextOverflow:
        return
    raise AssertionError(
        "system instructions over the allowance: expected ContextOverflow,"
        f" got a view of {len(list(view))} messages"
    )


COMPACTOR_CHECKS: tuple[tuple[str, Callable[[Compactor], None]], ...] = (
    ("unchanged", _unchanged),
    ("keeps", _keeps_what_matters),
    ("oversized", _oversized_result),
    ("overflow", _overflow),
)
COMPACTOR_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in COMPACTOR_CHECKS)


def check_compactor(make: Compactor, *, only: str | Iterable[str] | None = None) -> None:
    """``make()`` returns a fresh compactor (what ``soulacy_make_compactor`` returns).

    Under its allowance (or with none) the view is the messages; over it, the view is shorter
    and keeps the system instructions, the goal, the latest request and the most recent tool
    exchange, each tool call with its result, and leaves the messages given unchanged; an
    oversized tool result is cut and marked ``truncated``; system instructions over the
    allowance raise ContextOverflow. ``only`` runs the checks it names, of
    :data:`COMPACTOR_CHECK_NAMES`, and no other (an unknown name is a ValueError)."""
    selected = select_checks("compactor", COMPACTOR_CHECK_NAMES, only)
    for name, check in COMPACTOR_CHECKS:
        if name in selected:
            _named(f"compactor check {name}", functools.partial(check, make))


# -- providers ----------------------------------------------------------------------------------


async def check_provider(
    provider: Any, *, tools: Sequence[ToolSpec] = (), stream: bool = True
) -> ModelReply:
    """One real call through ``provider`` (set up by you to answer), checking the reply's
    shape: an assistant message, usage in whole tokens, tool calls with ids and known names,
    and streamed text that adds up to the reply. Returns the reply. One call is one check:
    this kit has no ``only=``."""
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
