"""``check_compactor``: the conformance kit of a compactor (what ``soulacy_compactor``
returns)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Sequence

from soulacy.kernel.contracts import Compactor, ContextOverflow
from soulacy.kernel.messages import Message, ToolCall, ToolSpec

from ._store import expect, expect_that, run_named, select_checks

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


CompactorFactory = Callable[[], Compactor]  # make(): a fresh compactor
_TOOLS = (ToolSpec("step", "a step", {"type": "object", "properties": {}}),)


def _unchanged(make: CompactorFactory) -> None:
    messages = _history(5)
    expect(list(make().compact(messages, None, _TOOLS)), messages, "no allowance: the view")
    expect(list(make().compact(messages, 10**9, _TOOLS)), messages, "under it: the view")


def _keeps_what_matters(make: CompactorFactory) -> None:
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


def _oversized_result(make: CompactorFactory) -> None:
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


def _overflow(make: CompactorFactory) -> None:
    messages = [Message("system", "rule " * 50_000), Message("user", "hi")]
    try:
        view = make().compact(messages, 1000, _TOOLS)
    except ContextOverflow:
        return
    raise AssertionError(
        "system instructions over the allowance: expected ContextOverflow,"
        f" got a view of {len(list(view))} messages"
    )


COMPACTOR_CHECKS: tuple[tuple[str, Callable[[CompactorFactory], None]], ...] = (
    ("unchanged", _unchanged),
    ("keeps", _keeps_what_matters),
    ("oversized", _oversized_result),
    ("overflow", _overflow),
)
COMPACTOR_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in COMPACTOR_CHECKS)


def check_compactor(make: CompactorFactory, *, only: str | Iterable[str] | None = None) -> None:
    """``make()`` returns a fresh compactor (what ``soulacy_compactor`` returns).

    Under its allowance (or with none) the view is the messages; over it, the view is shorter
    and keeps the system instructions, the goal, the latest request and the most recent tool
    exchange, each tool call with its result, and leaves the messages given unchanged; an
    oversized tool result is cut and marked ``truncated``; system instructions over the
    allowance raise ContextOverflow. ``only`` runs the checks it names, of
    :data:`COMPACTOR_CHECK_NAMES`, and no other (an unknown name is a ValueError)."""
    selected = select_checks("compactor", COMPACTOR_CHECK_NAMES, only)
    for name, check in COMPACTOR_CHECKS:
        if name in selected:
            run_named(f"compactor check {name}", functools.partial(check, make))
