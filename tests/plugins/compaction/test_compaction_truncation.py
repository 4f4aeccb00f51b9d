"""A tool result larger than the input allowance is cut to a head and a tail with an exact
omission marker and a structured ``truncated`` flag; nothing is ever cut to empty."""

from __future__ import annotations

from compaction_support import (
    GOAL,
    SYSTEM,
    TOOLS,
    assert_pairs_whole,
    call,
    exchange,
    lines,
    markers,
    parse_omission,
    result,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from soulacy.kernel.messages import Message
from soulacy.plugins.compaction import MIN_KEPT_CHARS, CompactionConfig, ExtractiveCompactor, cut

FIVE_MB = 5 * 1024 * 1024


def assert_exact_excerpt(original: str, shown: Message) -> None:
    """The flag, the marker and the text agree, and the arithmetic adds up."""
    meta = shown.meta
    assert meta["truncated"] is True
    omitted, total, head, tail = parse_omission(shown.content)
    assert total == meta["original_chars"] == len(original)
    assert head + tail == meta["kept_chars"] > 0
    assert omitted == meta["omitted_chars"] == total - head - tail
    assert meta["kept_chars"] + meta["omitted_chars"] == meta["original_chars"]
    before, marker_line, after = shown.content.partition("\n[… ")
    assert marker_line
    # What is shown really is the original's first ``head`` and last ``tail`` characters.
    assert original.startswith(before)
    assert len(before) in (head, head - 1)  # the head's own final newline stands before "[…"
    shown_tail = after.split(" …]", 1)[1].removeprefix("\n")
    assert len(shown_tail) == tail
    assert original.endswith(shown_tail)


def test_a_5_mb_tool_result_becomes_an_excerpt_with_exact_counts_and_the_truncated_flag() -> None:
    big = lines("log", FIVE_MB)
    messages = [SYSTEM, GOAL, call(0), result(0, big)]
    compactor = ExtractiveCompactor()
    view = compactor.compact(messages, 8_000, TOOLS)
    assert compactor.estimate(view, TOOLS) <= 8_000
    assert view[:3] == messages[:3]
    cut_result = view[3]
    assert (cut_result.role, cut_result.tool_call_id, cut_result.name) == ("tool", "call-0", "read")
    assert_exact_excerpt(big, cut_result)
    assert cut_result.meta["kept_chars"] > 20_000  # it uses the room there is
    assert len(cut_result.content) < 40_000


def test_an_excerpt_cuts_at_line_boundaries() -> None:
    big = lines("log", FIVE_MB)
    view = ExtractiveCompactor().compact([SYSTEM, GOAL, call(0), result(0, big)], 8_000, TOOLS)
    before, _, after = view[3].content.partition("\n[… ")
    assert before.endswith("\n") or big[len(before)] == "\n"
    tail = after.split(" …]\n", 1)[1]
    assert big[len(big) - len(tail) - 1] == "\n"


def test_an_older_huge_result_is_excerpted_inside_its_marker_with_exact_counts() -> None:
    big = lines("old", FIVE_MB)
    messages = [SYSTEM, GOAL, call(0), result(0, big)]
    messages += [m for i in range(1, 6) for m in exchange(i)]
    config = CompactionConfig(max_excerpts=20, excerpt_chars=400)
    view = ExtractiveCompactor(config).compact(messages, 2_000, TOOLS)
    (stand_in,) = markers(view)
    facts = stand_in.meta["compaction"]
    assert facts["span"] == [2, 4]  # the huge exchange; the newer ones fit whole
    assert facts["roles"] == {"assistant": 1, "tool": 1}
    assert facts["chars"] == FIVE_MB + len('→ read({"path": "f0"})')
    assert facts["kept_chars"] + facts["omitted_chars"] == facts["chars"]
    block = stand_in.content.split("--- excerpt · tool result of read · ")[1]
    label, _, body = block.partition("\n")
    omitted, total, head, tail = parse_omission(body)
    assert label == f"{head + tail} of {FIVE_MB:,} characters ---"
    assert (total, head + tail + omitted) == (FIVE_MB, FIVE_MB)
    assert body.startswith(big[: head - 1])
    assert body.endswith(big[-tail:])
    assert_pairs_whole(view, messages)


def test_every_kept_result_gets_a_share_and_none_is_cut_to_empty() -> None:
    messages = [SYSTEM, GOAL]
    sizes = [150, 40_000, 3_000, 900_000, 101]
    messages.append(
        Message(
            "assistant",
            "",
            tool_calls=tuple(call(i).tool_calls[0] for i in range(len(sizes))),
        )
    )
    messages += [result(i, lines(f"r{i}", size)) for i, size in enumerate(sizes)]
    compactor = ExtractiveCompactor()
    view = compactor.compact(messages, 4_000, TOOLS)
    assert compactor.estimate(view, TOOLS) <= 4_000
    assert_pairs_whole(view, messages)
    shown = view[-len(sizes) :]
    for original, kept in zip(messages[-len(sizes) :], shown, strict=True):
        assert kept.content
        if kept.meta.get("truncated"):
            assert_exact_excerpt(original.content, kept)
        else:
            assert kept is original
    assert shown[-1] is messages[-1]  # a small result is not cut for the big ones


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from("ab \n\t{}é"), min_size=1, max_size=3_000),
    keep=st.integers(min_value=-5, max_value=3_500),
)
def test_cut_never_empties_a_text_and_never_misreports_what_it_dropped(
    text: str, keep: int
) -> None:
    excerpt = cut(text, keep)
    assert excerpt.original == len(text)
    assert excerpt.kept + excerpt.omitted == len(text)
    assert excerpt.kept >= 1
    assert excerpt.kept <= max(1, keep) or excerpt.whole
    if excerpt.whole:
        assert excerpt.text == text
        return
    assert text.startswith(text[: excerpt.head])
    omitted, total, head, tail = parse_omission(excerpt.text)
    assert (omitted, total, head, tail) == (excerpt.omitted, len(text), excerpt.head, excerpt.tail)
    assert excerpt.text.startswith(text[:head])
    if tail:
        assert excerpt.text.endswith("\n" + text[len(text) - tail :])


def test_the_shortest_excerpt_keeps_at_least_a_line_of_text() -> None:
    text = lines("x", 10_000)
    excerpt = cut(text, MIN_KEPT_CHARS)
    assert excerpt.kept >= MIN_KEPT_CHARS // 2
    assert excerpt.text.count("\n") >= 3
