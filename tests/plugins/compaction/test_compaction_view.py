"""The view sent to the model: unchanged under the allowance; over it, extractive compaction
that keeps the instructions, the goal, the latest request and the newest exchanges, and stands
exact markers in for the rest (seed: "context pressure triggers extractive compaction")."""

from __future__ import annotations

import pytest
from compaction_support import (
    GOAL,
    SYSTEM,
    TOOLS,
    assert_pairs_whole,
    conversation,
    exchange,
    markers,
    parse_header,
    parse_omission,
)

from soulacy.kernel.messages import Message
from soulacy.plugins.compaction import PREFIX, CompactionConfig, ExtractiveCompactor, render


def test_an_unknown_allowance_passes_the_messages_through_unchanged() -> None:
    messages = conversation(50, chars=50_000)
    assert ExtractiveCompactor().compact(messages, None, TOOLS) is messages


def test_under_the_allowance_the_same_list_goes_to_the_model() -> None:
    messages = conversation(10)
    compactor = ExtractiveCompactor()
    view = compactor.compact(messages, 100_000, TOOLS)
    assert view is messages
    assert compactor.compact(messages, compactor.estimate(messages, TOOLS), TOOLS) is messages


def test_one_token_over_the_allowance_compacts() -> None:
    messages = conversation(10)
    compactor = ExtractiveCompactor()
    exact = compactor.estimate(messages, TOOLS)
    view = compactor.compact(messages, exact - 1, TOOLS)
    assert view is not messages
    assert compactor.estimate(view, TOOLS) <= exact - 1


def test_over_the_allowance_the_instructions_goal_latest_request_and_recent_exchanges_stay() -> (
    None
):
    messages = conversation(300, latest="Now also update the changelog.")
    compactor = ExtractiveCompactor(goal=lambda: 1)
    view = compactor.compact(messages, 3_000, TOOLS)
    assert compactor.estimate(view, TOOLS) <= 3_000
    assert view[0] is SYSTEM
    assert view[1] is GOAL
    latest = messages[-3]
    assert latest.role == "user"
    assert latest in view
    # The newest exchanges are there whole, as the same objects.
    assert view[-2:] == messages[-2:]
    assert all(a is b for a, b in zip(view[-2:], messages[-2:], strict=True))
    assert view[-5:-3] == messages[-5:-3]  # the exchange before the latest request
    assert_pairs_whole(view, messages)


def test_the_markers_say_exactly_which_messages_and_how_many_characters_are_left_out() -> None:
    messages = conversation(300, latest="Now also update the changelog.")
    view = ExtractiveCompactor(goal=lambda: 1).compact(messages, 3_000, TOOLS)
    (stand_in,) = markers(view)
    facts = stand_in.meta["compaction"]
    start, end = facts["span"]
    left_out = messages[start:end]
    # Every message of the original is in the view or in a marker's span, exactly once.
    shown = {id(m) for m in view}
    assert [m for m in messages if id(m) not in shown] == left_out
    roles: dict[str, int] = {}
    for m in left_out:
        roles[m.role] = roles.get(m.role, 0) + 1
    chars = sum(len(render(m)) for m in left_out)
    assert facts["roles"] == roles
    assert facts["messages"] == len(left_out)
    assert facts["chars"] == chars
    assert facts["kept_chars"] + facts["omitted_chars"] == chars
    # What the model reads says the same as the structured facts.
    said = parse_header(stand_in.content)
    assert said == {
        "messages": len(left_out),
        "roles": roles,
        "chars": chars,
        "excerpted": facts["excerpted"],
        "kept": facts["kept_chars"],
        "omitted": facts["omitted_chars"],
    }
    assert stand_in.content.count("--- excerpt · ") == facts["excerpted"] > 0


def test_excerpts_are_labelled_and_taken_from_the_newest_left_out_messages() -> None:
    messages = conversation(300, chars=3_000, latest="Next step.")
    config = CompactionConfig(excerpt_chars=500, max_excerpts=3)
    view = ExtractiveCompactor(config, goal=lambda: 1).compact(messages, 4_000, TOOLS)
    (stand_in,) = markers(view)
    _start, end = stand_in.meta["compaction"]["span"]
    blocks = stand_in.content.split("\n\n--- excerpt · ")[1:]
    assert len(blocks) == 3
    kept = 0
    for block, message in zip(blocks, messages[end - 3 : end], strict=True):
        label, _, body = block.partition("\n")
        text = render(message)
        if message.role == "tool":
            omitted, original, head, tail = parse_omission(body)
            assert label == f"tool result of read · {head + tail} of {original:,} characters ---"
            assert (original, head + tail + omitted) == (len(text), len(text))
            assert 0 < head + tail <= 500
            shown_head, _, _shown_tail = body.partition("\n[… ")
            assert shown_head == text[:head] or shown_head + "\n" == text[:head]
            assert body.endswith(text[len(text) - tail :])
            kept += head + tail
        else:
            assert label == f"assistant calling read · all {len(text)} characters ---"
            assert body == text
            kept += len(text)
    assert stand_in.meta["compaction"]["kept_chars"] == kept


def test_a_marker_without_excerpts_says_everything_it_stands_for_is_omitted() -> None:
    messages = conversation(40, latest="Next.")
    config = CompactionConfig(max_excerpts=0)
    view = ExtractiveCompactor(config).compact(messages, 700, TOOLS)
    (stand_in,) = markers(view)
    facts = stand_in.meta["compaction"]
    assert facts["excerpted"] == 0
    assert stand_in.content.endswith(f"All {facts['chars']:,} characters are omitted.")


def test_the_marker_text() -> None:
    """The exact wording (docs/compaction.md shows it)."""
    messages = [SYSTEM, GOAL, *exchange(0, 300), *exchange(1, 300), *exchange(2, 300)]
    config = CompactionConfig(keep_recent_exchanges=1, max_excerpts=1, excerpt_chars=100)
    view = ExtractiveCompactor(config).compact(messages, 300, TOOLS)
    assert view[:2] == [SYSTEM, GOAL]
    assert view[3:] == messages[-2:]
    # 2 calls of 22 characters ('→ read({"path": "f0"})') and 2 results of 300.
    assert view[2].content == (
        f"{PREFIX} 4 earlier messages (2 assistant, 2 tool; 644 characters) are not shown in"
        " full, to fit the input allowance; the stored history keeps them whole. Excerpts of"
        " the latest 1 follow, keeping 69 characters; 575 characters are omitted.\n\n"
        "--- excerpt · tool result of read · 69 of 300 characters ---\n"
        "result 1 line 000000\nresult 1 line 000001\n"
        "[… 231 of 300 characters omitted; kept the first 42 and the last 27 …]\n"
        "result 1 line 000013\nresult"
    )


def test_history_before_the_goal_gets_its_own_marker() -> None:
    earlier = [Message("user", "An earlier request."), *exchange(100), Message("assistant", "ok")]
    goal = Message("user", "GOAL of this run")
    messages = [SYSTEM, *earlier, goal, *[m for i in range(50) for m in exchange(i)]]
    goal_at = messages.index(goal)
    view = ExtractiveCompactor(goal=lambda: goal_at).compact(messages, 1_500, TOOLS)
    first, second = markers(view)
    assert view[:4] == [SYSTEM, first, goal, second]
    assert first.meta["compaction"]["span"] == [1, goal_at]
    assert first.meta["compaction"]["roles"] == {"user": 1, "assistant": 2, "tool": 1}
    assert_pairs_whole(view, messages)


def test_without_a_goal_index_the_first_user_message_is_the_goal() -> None:
    messages = conversation(200)
    view = ExtractiveCompactor().compact(messages, 1_000, TOOLS)
    assert view[1] is GOAL


@pytest.mark.parametrize("keep", [1, 2, 4])
def test_the_newest_exchanges_are_kept_even_when_their_results_must_be_cut(keep: int) -> None:
    messages = conversation(20, chars=40_000)
    config = CompactionConfig(keep_recent_exchanges=keep)
    view = ExtractiveCompactor(config).compact(messages, 6_000, TOOLS)
    tail = view[-2 * keep :]
    assert [m.role for m in tail] == ["assistant", "tool"] * keep
    assert all(m.meta.get("truncated") for m in tail if m.role == "tool")
    assert [m.tool_call_id for m in tail if m.role == "tool"] == [
        m.tool_call_id for m in messages[-2 * keep :] if m.role == "tool"
    ]
    assert_pairs_whole(view, messages)
