"""Properties over random histories: tool calls and their results are never separated, the view
fits the allowance, nothing is mutated, and the goal and latest request survive any length."""

from __future__ import annotations

import copy

from compaction_support import (
    GOAL,
    SYSTEM,
    TOOLS,
    assert_pairs_whole,
    conversation,
    markers,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from soulacy.kernel.contracts import ContextOverflow
from soulacy.kernel.messages import Message, ToolCall
from soulacy.plugins.compaction import CompactionConfig, ExtractiveCompactor, render

# One step of a random history: a user message, an assistant text, or an assistant message
# calling 1-3 tools followed by all of their results (sizes up to 20k characters).
step = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 3_000)),
    st.tuples(st.just("assistant"), st.integers(0, 2_000)),
    st.tuples(st.just("tools"), st.lists(st.integers(0, 20_000), min_size=1, max_size=3)),
)


def text(size: int) -> str:
    return ("r" * 59 + "\n") * (size // 60) + "x" * (size % 60)


def build(steps: list[tuple[str, object]]) -> list[Message]:
    messages = [SYSTEM, GOAL]
    for n, (kind, size) in enumerate(steps):
        if kind == "tools":
            assert isinstance(size, list)
            calls = tuple(ToolCall(f"c{n}-{k}", "read", {"k": k}) for k in range(len(size)))
            messages.append(Message("assistant", "", tool_calls=calls))
            messages += [
                Message("tool", text(s), tool_call_id=f"c{n}-{k}", name="read")
                for k, s in enumerate(size)
            ]
        else:
            assert isinstance(size, int)
            messages.append(Message(kind, "w" * size))  # type: ignore[arg-type]
    return messages


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(step, min_size=0, max_size=40),
    allowance=st.integers(200, 12_000),
    keep=st.integers(1, 3),
    excerpts=st.integers(0, 5),
)
def test_random_histories(
    steps: list[tuple[str, object]], allowance: int, keep: int, excerpts: int
) -> None:
    messages = build(steps)
    snapshot = copy.deepcopy(messages)
    ids = [id(m) for m in messages]
    config = CompactionConfig(keep_recent_exchanges=keep, max_excerpts=excerpts)
    compactor = ExtractiveCompactor(config, goal=lambda: 1)
    overflow: ContextOverflow | None = None
    try:
        view = compactor.compact(messages, allowance, TOOLS)
    except ContextOverflow as exc:
        overflow = exc
    assert messages == snapshot  # the run's record is untouched
    assert [id(m) for m in messages] == ids
    if overflow is not None:
        assert overflow.required > allowance
        assert overflow.allowance == allowance
        return
    assert compactor.estimate(view, TOOLS) <= allowance
    assert_pairs_whole(view, messages)
    assert view[0] is SYSTEM
    assert view[1].content == GOAL.content
    latest = max(i for i, m in enumerate(messages) if m.role == "user")
    assert any(m.content == messages[latest].content or m.meta.get("truncated") for m in view)
    # Every original message is shown (maybe cut) or counted by exactly one marker.
    counted = sum(m.meta["compaction"]["messages"] for m in markers(view))
    assert counted + len(view) - len(markers(view)) == len(messages)
    for stand_in in markers(view):
        start, end = stand_in.meta["compaction"]["span"]
        chars = sum(len(render(m)) for m in messages[start:end])
        facts = stand_in.meta["compaction"]
        assert facts["chars"] == chars == facts["kept_chars"] + facts["omitted_chars"]
    for shown in view:
        if shown.meta.get("truncated"):
            assert shown.content
            assert (
                shown.meta["kept_chars"] + shown.meta["omitted_chars"]
                == (shown.meta["original_chars"])
            )


def test_the_goal_and_latest_request_survive_10000_turns_of_tool_traffic() -> None:
    messages = conversation(10_000, chars=300, latest="LATEST: now write the report.")
    assert len(messages) >= 20_000
    compactor = ExtractiveCompactor(goal=lambda: 1)
    view = compactor.compact(messages, 8_000, TOOLS)
    assert compactor.estimate(view, TOOLS) <= 8_000
    assert view[0] is SYSTEM
    assert view[1] is GOAL
    assert messages[-3] in view
    assert messages[-3].content.startswith("LATEST")
    assert view[-2:] == messages[-2:]
    assert_pairs_whole(view, messages)
    (stand_in,) = markers(view)
    assert stand_in.meta["compaction"]["messages"] > 19_000


def test_compaction_never_mutates_the_original_messages() -> None:
    messages = conversation(200, chars=5_000, latest="Next.")
    messages[5] = Message("tool", "x" * 50_000, tool_call_id="call-1", name="read", meta={"a": 1})
    snapshot = copy.deepcopy(messages)
    before = list(messages)
    compactor = ExtractiveCompactor()
    view = compactor.compact(messages, 2_000, TOOLS)
    assert view is not messages
    assert messages == snapshot
    assert all(a is b for a, b in zip(messages, before, strict=True))
    assert messages[5].meta == {"a": 1}
    assert not any(m.meta.get("truncated") for m in messages)
