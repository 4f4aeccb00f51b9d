"""Head-and-tail excerpts of a text, with an omission line that gives the exact counts."""

from __future__ import annotations

import math
from typing import Any

import attrs

from soulacy.kernel.messages import Message

from ._config import MIN_KEPT_CHARS
from ._tokens import Measure

HEAD_SHARE = 0.6  # of the kept characters; the tail gets the rest (errors and totals live there)


def omission_line(original: int, head: int, tail: int) -> str:
    omitted = original - head - tail
    return (
        f"[… {omitted:,} of {original:,} characters omitted;"
        f" kept the first {head:,} and the last {tail:,} …]"
    )


@attrs.frozen
class Excerpt:
    """What is shown of a text of ``original`` characters: its first ``head`` and last ``tail``
    characters, with an omission line between them when anything was left out."""

    text: str
    original: int
    head: int
    tail: int

    @property
    def kept(self) -> int:
        return self.head + self.tail

    @property
    def omitted(self) -> int:
        return self.original - self.kept

    @property
    def whole(self) -> bool:
        return self.omitted == 0


def whole(text: str) -> Excerpt:
    return Excerpt(text, len(text), len(text), 0)


def cut(text: str, keep: int) -> Excerpt:
    """Keep at most ``keep`` characters (at least 1) of ``text``: a head and a tail, shortened to
    end and start at line boundaries when that costs at most half of each."""
    size, keep = len(text), max(1, keep)
    if keep >= size:
        return whole(text)
    head = math.ceil(keep * HEAD_SHARE)
    tail = keep - head
    newline = text.rfind("\n", 0, head)
    if newline >= 0 and newline + 1 >= head / 2:
        head = newline + 1
    if tail:
        start = size - tail
        newline = text.find("\n", start - 1, size)  # a tail that starts a line
        if newline >= 0 and newline + 1 - start <= tail / 2:
            tail = size - newline - 1
    head_text, tail_text = text[:head], text[size - tail :] if tail else ""
    line = omission_line(size, head, tail)
    shown = head_text + ("" if head_text.endswith("\n") else "\n") + line
    if tail_text:
        shown += "\n" + tail_text
    return Excerpt(shown, size, head, tail)


def fit(text: str, budget: int, measure: Measure, cost: int | None = None) -> Excerpt | None:
    """The longest excerpt of ``text`` whose message cost is at most ``budget``, or None when
    even the shortest allowed one (``MIN_KEPT_CHARS``) does not fit. ``cost`` is the whole
    text's cost when already known."""
    cost = measure.text(text) if cost is None else cost
    if cost <= budget:
        return whole(text)
    size = len(text)
    if size <= MIN_KEPT_CHARS:
        return None  # too short to cut: it is shown whole or not at all
    floor = MIN_KEPT_CHARS
    # Characters per token of this very text, so that any counter lands close at once.
    density = size / max(1, cost - measure.overhead)
    room = budget - measure.overhead
    keep = math.floor(room * density) - len(omission_line(size, size, size)) - 2
    for _ in range(32):
        keep = max(keep, floor)
        excerpt = cut(text, keep)
        if measure.text(excerpt.text) <= budget:
            return excerpt
        if keep == floor:
            return None
        keep = math.floor(keep * 0.9)
    return None  # pragma: no cover - a counter that grows as texts shrink


def truncated(message: Message, excerpt: Excerpt) -> Message:
    """A copy of ``message`` showing ``excerpt``, with the structured ``truncated`` flag."""
    meta: dict[str, Any] = {
        **message.meta,
        "truncated": True,
        "original_chars": excerpt.original,
        "kept_chars": excerpt.kept,
        "omitted_chars": excerpt.omitted,
    }
    return attrs.evolve(message, content=excerpt.text, meta=meta)
