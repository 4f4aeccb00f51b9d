"""The cost of a model call does not grow with the whole history: each message is measured once
(the engine only appends), and a compaction reads only what it keeps, from the tail back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, SupportsIndex, overload

from compaction_support import TOOLS, conversation, exchange

from soulacy.kernel.messages import Message
from soulacy.plugins.compaction import CharEstimate, ExtractiveCompactor, render


class Watched(list[Message]):
    """A message list that counts the elements read from it (by index, slice or iteration)."""

    reads = 0

    @overload
    def __getitem__(self, key: SupportsIndex) -> Message: ...
    @overload
    def __getitem__(self, key: slice) -> list[Message]: ...
    def __getitem__(self, key: Any) -> Any:
        got = super().__getitem__(key)
        self.reads += len(got) if isinstance(key, slice) else 1
        return got

    def __iter__(self) -> Iterator[Message]:
        self.reads += len(self)
        return super().__iter__()


class CountingEstimate:
    """The default estimate, counting the texts it measures."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.estimate = CharEstimate()

    def __call__(self, text: str) -> int:
        self.seen[text] += 1
        return self.estimate(text)


def test_under_the_allowance_only_appended_messages_are_measured() -> None:
    counter = CountingEstimate()
    compactor = ExtractiveCompactor(counter=counter)
    messages = conversation(500)
    compactor.compact(messages, 10**9, TOOLS)
    first = sum(counter.seen.values())
    assert first == len(messages) + len(TOOLS)
    for turn in range(10):
        messages += exchange(1_000 + turn)
        assert compactor.compact(messages, 10**9, TOOLS) is messages
    assert sum(counter.seen.values()) == first + 20


def test_over_the_allowance_every_message_is_still_measured_once() -> None:
    counter = CountingEstimate()
    compactor = ExtractiveCompactor(counter=counter)
    messages = conversation(500, chars=997)  # unique contents, none excerpted whole
    for turn in range(20):
        compactor.compact(messages, 3_000, TOOLS)
        messages += exchange(1_000 + turn, chars=997)
    compactor.compact(messages, 3_000, TOOLS)
    for message in messages:
        assert counter.seen[render(message)] == 1


def reads_per_call(turns: int) -> list[int]:
    """Elements read by each of 5 compactions after appending a turn to ``turns`` turns."""
    messages = Watched(conversation(turns))
    compactor = ExtractiveCompactor(goal=lambda: 1)
    compactor.compact(messages, 2_000, TOOLS)  # the first call measures everything once
    reads = []
    for turn in range(5):
        messages += exchange(10**6 + turn)
        messages.reads = 0
        view = compactor.compact(messages, 2_000, TOOLS)
        assert len(view) < 100
        reads.append(messages.reads)
    return reads


def test_a_compaction_reads_what_it_keeps_not_the_whole_history() -> None:
    short, long = reads_per_call(500), reads_per_call(10_000)
    assert max(long) <= 1.1 * max(short)
    assert max(long) < 200


def test_a_different_list_is_measured_from_scratch() -> None:
    compactor = ExtractiveCompactor()
    first = conversation(50)
    compactor.compact(first, 1_000, TOOLS)
    second = conversation(20, chars=400)
    view = compactor.compact(second, 10**9, TOOLS)
    assert view is second
    assert compactor.estimate(second, TOOLS) == compactor.ledger.tokens[-1] + compactor.estimate(
        [], TOOLS
    )
    assert len(compactor.ledger) == len(second)
    shorter = second[:10]
    compactor.compact(shorter, 10**9, TOOLS)
    assert len(compactor.ledger) == 10
