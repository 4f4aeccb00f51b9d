"""One compaction over the input allowance: what to keep, what to cut, what to stand in for.

The work is bounded by what is kept: the tail is walked backwards from the newest message and
the walk stops once the budget is used; what lies before it is described from prefix sums.
All costs here are raw estimate units (before calibration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from soulacy.kernel.contracts import ContextOverflow
from soulacy.kernel.messages import Message

from ._config import MIN_KEPT_CHARS
from ._excerpt import Excerpt, cut, fit, truncated, whole
from ._markers import excerpt_block, longest_header, marker
from ._tokens import render

if TYPE_CHECKING:
    from ._compactor import ExtractiveCompactor

Span = tuple[int, int]  # [start, end) of the original list


@attrs.frozen
class _Item:
    """A kept message that may be cut: its whole cost and its shortest excerpt's."""

    index: int
    full: int
    floor: int
    shortest: Excerpt | None


class Plan:
    """Builds one compacted view and its cost."""

    def __init__(
        self,
        owner: ExtractiveCompactor,
        messages: Sequence[Message],
        fixed: int,
        limit: int,
        allowance: int,
    ) -> None:
        self.owner, self.messages, self.fixed = owner, messages, fixed
        self.limit, self.allowance = limit, allowance
        self.ledger, self.measure, self.config = owner.ledger, owner.measure, owner.config
        self.system = min(self.ledger.system_prefix, len(messages))  # the instructions
        self.header_cost = 0  # of the longest marker header this list could need

    def build(self) -> tuple[list[Message], int]:
        n, system = len(self.messages), self.system
        base = self.fixed + self.ledger.cost(0, system)
        if base > self.limit:
            raise self._overflow(base, self._what())
        budget = self.limit - base
        pinned = self._pinned()
        # Room for one marker per run of messages that may be left out, before knowing them.
        longest = longest_header(
            list(self.ledger.roles(system, n)),
            n,
            self.ledger.size(system, n),
            self.config.max_excerpts,
        )
        self.header_cost = self.measure.text(longest)
        reserve = self.header_cost * len(self._gaps(n, pinned))
        items = {i: self._item(i) for i in pinned}
        needed = sum(item.floor for item in items.values()) + reserve
        if needed > budget:
            what = self._what() + ", the shortest excerpts of the goal and latest request"
            raise self._overflow(base + needed, what + " and an omission marker")
        start = self._keep_newest(items, budget - needed)
        room = budget - reserve
        if sum(item.full for item in items.values()) > room:
            # Kept messages that must be cut take at most half the room beyond their shortest
            # forms, so that one huge result leaves room for older history; what history
            # leaves unused goes back to them below.
            floors = sum(item.floor for item in items.values())
            room = floors + (room - floors) // 2
        replaced, spent = self._share(items, room)
        start, spare = self._keep_older(start, items, budget - reserve - spent)
        gaps = self._gaps(start, pinned)
        spare += reserve - self.header_cost * len(gaps)
        excerpts, spare = self._excerpts(gaps, spare)
        if replaced and spare > 0:
            replaced, _ = self._share(items, spent + spare)
        return self._assemble(base, start, pinned, replaced, gaps, excerpts)

    def _keep_newest(self, items: dict[int, _Item], room: int) -> int:
        """Add the newest ``keep_recent_exchanges`` units to ``items`` while their shortest
        forms fit in ``room``; returns where the kept tail starts."""
        start, protected = len(self.messages), 0
        while start > self.system and protected < self.config.keep_recent_exchanges:
            unit = self._unit_start(start)
            if unit in items:  # the pinned goal or latest request: already paid for
                start = unit
                continue
            unit_items = [self._item(i) for i in range(unit, start)]
            cost = sum(item.floor for item in unit_items)
            if cost > room:
                break
            room -= cost
            items.update((item.index, item) for item in unit_items)
            start, protected = unit, protected + 1
        return start

    def _keep_older(self, start: int, items: dict[int, _Item], spare: int) -> tuple[int, int]:
        """Older units, whole, while they fit: the walk stops at the first that does not."""
        while start > self.system:
            unit = self._unit_start(start)
            cost = 0 if unit in items else self.ledger.cost(unit, start)
            if cost > spare:
                break
            spare -= cost
            start = unit
        return start, spare

    def _assemble(
        self,
        base: int,
        start: int,
        pinned: Sequence[int],
        replaced: dict[int, Message],
        gaps: Sequence[Span],
        excerpts: dict[Span, list[tuple[Message, Excerpt]]],
    ) -> tuple[list[Message], int]:
        """In order: the instructions, markers and pinned messages before the tail, the tail."""
        messages, ledger = self.messages, self.ledger
        pieces: list[tuple[int, Message, int]] = []
        for gap in gaps:
            stand_in = marker(ledger.roles(*gap), ledger.size(*gap), gap, excerpts.get(gap, []))
            pieces.append((gap[0], stand_in, self.measure.text(stand_in.content)))
        for index in pinned:
            if index < start:
                message = replaced.get(index, messages[index])
                pieces.append((index, message, self._cost(index, message)))
        pieces.sort(key=lambda piece: piece[0])
        view = list(messages[: self.system])
        view += [message for _, message, _ in pieces]
        cost = base + sum(piece_cost for _, _, piece_cost in pieces)
        offset = len(view) - start
        view += messages[start:]
        cost += ledger.cost(start, len(messages))
        for index, message in replaced.items():
            if index >= start:
                view[offset + index] = message
                cost += self._cost(index, message) - ledger.cost(index, index + 1)
        return view, cost

    # -- pieces ----------------------------------------------------------------------------

    def _pinned(self) -> list[int]:
        """The goal and the latest request."""
        messages, ledger, system = self.messages, self.ledger, self.system
        goal = self.owner.goal() if self.owner.goal is not None else None
        if goal is None or not system <= goal < len(messages) or messages[goal].role != "user":
            goal = ledger.first_user
        return sorted({i for i in (goal, ledger.last_user) if i is not None})

    def _unit_start(self, end: int) -> int:
        """The first index of the unit ending before ``end``: an assistant message with tool
        calls and the tool results after it go together; anything else stands alone."""
        messages, floor = self.messages, self.system
        index = end - 1
        if messages[index].role != "tool":
            return index
        while index > floor and messages[index - 1].role == "tool":
            index -= 1
        if index > floor and messages[index - 1].tool_calls:
            return index - 1
        return index

    def _item(self, index: int) -> _Item:
        message = self.messages[index]
        full = self.ledger.cost(index, index + 1)
        if message.tool_calls or len(message.content) <= MIN_KEPT_CHARS:
            return _Item(index, full, full, None)  # tool-call arguments are never cut
        shortest = cut(message.content, MIN_KEPT_CHARS)
        floor = self.measure.text(shortest.text)
        return _Item(index, full, min(full, floor), shortest if floor < full else None)

    def _share(self, items: dict[int, _Item], room: int) -> tuple[dict[int, Message], int]:
        """Share ``room`` among kept messages: each gets its shortest form, then what is left
        goes to the smallest needs first, evenly (so one huge result cannot starve the rest)."""
        spare = room - sum(item.floor for item in items.values())
        order = sorted(items.values(), key=lambda item: item.full - item.floor)
        replaced: dict[int, Message] = {}
        spent = 0
        for left, item in zip(range(len(order), 0, -1), order, strict=True):
            extra = min(item.full - item.floor, spare // left)
            spare -= extra
            grant = item.floor + extra
            if grant >= item.full:
                spent += item.full
                continue
            message = self.messages[item.index]
            excerpt = fit(message.content, grant, self.measure, item.full) or item.shortest
            assert excerpt is not None  # grant < full only for messages that can be cut
            replaced[item.index] = truncated(message, excerpt)
            spent += self.measure.text(excerpt.text)
        return replaced, spent

    def _gaps(self, start: int, pinned: Sequence[int]) -> list[Span]:
        """The runs of left-out messages: ``[system, start)`` without the pinned ones."""
        gaps: list[Span] = []
        cursor = self.system
        for index in pinned:
            if index >= start:
                break
            if index > cursor:
                gaps.append((cursor, index))
            cursor = index + 1
        if start > cursor:
            gaps.append((cursor, start))
        return gaps

    def _excerpts(
        self, gaps: Sequence[Span], spare: int
    ) -> tuple[dict[Span, list[tuple[Message, Excerpt]]], int]:
        """Excerpts of the newest left-out messages, newest first, while they fit in
        ``spare``; returns them by run, and what is left of ``spare``."""
        found: dict[Span, list[tuple[Message, Excerpt]]] = {}
        left = self.config.max_excerpts
        counter = self.measure.counter
        for gap in reversed(gaps):
            for index in range(gap[1] - 1, gap[0] - 1, -1):
                if left <= 0:
                    return found, spare
                message = self.messages[index]
                text = render(message)
                excerpt = cut(text, self.config.excerpt_chars)
                cost = counter(excerpt_block(message, excerpt)) + 1  # +1: the joining blank line
                if cost > spare:
                    # Use what is left for a shorter excerpt, then stop.
                    label = counter(excerpt_block(message, whole(""))) + 1
                    room = spare - label + self.measure.overhead
                    known = self.ledger.cost(index, index + 1)  # never measure it again
                    shorter = fit(text, room, self.measure, known)
                    if shorter is None:
                        return found, spare
                    cost = counter(excerpt_block(message, shorter)) + 1
                    if cost > spare:
                        return found, spare
                    excerpt, left = shorter, 0
                spare -= cost
                left -= 1
                found.setdefault(gap, []).insert(0, (message, excerpt))
        return found, spare

    def _cost(self, index: int, message: Message) -> int:
        if message is self.messages[index]:
            return self.ledger.cost(index, index + 1)
        return self.measure.text(message.content)  # a cut copy

    def _what(self) -> str:
        tokens = self.owner.calibration.tokens
        instructions = tokens(self.ledger.cost(0, self.system))
        return (
            f"the system instructions ({instructions:,} tokens) and tool schemas"
            f" ({tokens(self.fixed):,} tokens)"
        )

    def _overflow(self, required: int, what: str) -> ContextOverflow:
        owner, need = self.owner, self.owner.calibration.tokens(required)
        where = f"the input allowance of {self.allowance:,} tokens"
        # The window explains the allowance unless the engine retries with a provider's limit.
        window = owner.window
        if window is not None and max(0, window - (owner.reserve or 0)) != self.allowance:
            window = None
        if window is not None:
            where += (
                f" (context window {window:,} minus {owner.reserve or 0:,} reserved for"
                " the response)"
            )
        message = (
            f"{what} need {need:,} tokens, more than {where}; dropping the task cannot resolve"
            " this: shorten the system prompt, offer fewer tools or reserve fewer output tokens"
            " (llm.max_tokens)"
        )
        return ContextOverflow(message, required=need, allowance=self.allowance, limit=window)
