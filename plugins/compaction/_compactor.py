"""The builtin compactor: extractive, no model call, bounded work per model call."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from soulacy.kernel.engine import ContextOverflow
from soulacy.kernel.messages import Message, ToolSpec

from ._config import MIN_KEPT_CHARS, CompactionConfig
from ._excerpt import Excerpt, cut, fit, truncated, whole
from ._ledger import Ledger
from ._markers import excerpt_block, longest_header, marker
from ._tokens import Calibration, CharEstimate, Measure, TokenCounter, render


class ExtractiveCompactor:
    """Builds the view sent to the model from the run's messages, under an input allowance.

    Under the allowance the messages go as they are (the same list). Over it, the view keeps the
    system instructions, the goal (``goal()``, else the first user message), the latest request
    (the last user message) and the newest exchanges, and replaces each run of older messages
    by a marker message with exact counts and excerpts. Nothing in ``messages`` is changed.

    One instance serves one run: it measures each message once (see :class:`Ledger`).
    """

    def __init__(
        self,
        config: CompactionConfig | None = None,
        counter: TokenCounter | None = None,
        *,
        goal: Callable[[], int | None] | None = None,
        window: int | None = None,
        reserve: int | None = None,
    ) -> None:
        self.config = config or CompactionConfig()
        self.measure = Measure(
            counter or CharEstimate(self.config.chars_per_token),
            self.config.message_overhead_tokens,
        )
        self.calibration = Calibration()
        self.ledger = Ledger(self.measure)
        self.goal = goal
        self.window = window  # the model's context window: the limit an overflow reports
        self.reserve = reserve  # tokens reserved for the response
        self._tools: Sequence[ToolSpec] | None = None
        self._tools_len = -1
        self._tools_cost = 0
        self._last: tuple[Sequence[Message], int, int] | None = None  # a view, its length, cost

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]:
        self.ledger.sync(messages)  # measured even when unbounded, for calibration
        fixed = self._schema_cost(tools)
        total = fixed + self.ledger.tokens[-1]
        if allowance is None or total <= self.calibration.budget(allowance):
            self._last = (messages, len(messages), total)
            return messages
        limit = self.calibration.budget(allowance)
        view, cost = _Plan(self, messages, fixed, limit, allowance).build()
        self._last = (view, len(view), cost)
        return view

    def calibrate(self, view: Sequence[Message], reported_input_tokens: int) -> None:
        """Learn from the provider's count of what ``view`` (a result of :meth:`compact`) cost."""
        last = self._last
        if last is not None and last[0] is view and last[1] == len(view):
            estimated = last[2]
        else:
            estimated = self._tools_cost + sum(self.measure.message(m)[1] for m in view)
        self.calibration.observe(estimated, reported_input_tokens)

    def estimate(self, view: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
        """The calibrated token estimate of sending ``view`` with ``tools`` (measured afresh)."""
        raw = self.measure.tools(tools) + sum(self.measure.message(m)[1] for m in view)
        return self.calibration.tokens(raw)

    def _schema_cost(self, tools: Sequence[ToolSpec]) -> int:
        # The engine passes the same list on every call: measure it once.
        if tools is not self._tools or len(tools) != self._tools_len:
            self._tools, self._tools_len = tools, len(tools)
            self._tools_cost = self.measure.tools(tools)
        return self._tools_cost


@attrs.frozen
class _Item:
    """A kept message that may be cut: its whole cost and its shortest excerpt's."""

    index: int
    full: int
    floor: int
    shortest: Excerpt | None


class _Plan:
    """One compaction over the allowance. All costs are raw estimate units."""

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

    def build(self) -> tuple[list[Message], int]:
        messages, ledger, n = self.messages, self.ledger, len(self.messages)
        system = min(ledger.system_prefix, n)
        base = self.fixed + ledger.cost(0, system)
        if base > self.limit:
            raise self._overflow(base, self._what(system))
        budget = self.limit - base
        pinned = self._pinned(system)
        # Room for one marker per run of messages that may be left out, before knowing them.
        longest = longest_header(
            list(ledger.roles(system, n)), n, ledger.size(system, n), self.config.max_excerpts
        )
        self.header_cost = self.measure.text(longest)
        reserve = self.header_cost * len(self._gaps(system, n, pinned))
        items = {i: self._item(i) for i in pinned}
        needed = sum(item.floor for item in items.values()) + reserve
        if needed > budget:
            what = self._what(system) + ", the shortest excerpts of the goal and latest request"
            raise self._overflow(base + needed, what + " and an omission marker")

        # The newest exchanges, whole or with their results cut, while their shortest form fits.
        start, protected = n, 0
        while start > system and protected < self.config.keep_recent_exchanges:
            unit = self._unit_start(start, system)
            if unit in items:  # the pinned goal or latest request: already paid for
                start = unit
                continue
            unit_items = [self._item(i) for i in range(unit, start)]
            cost = sum(item.floor for item in unit_items)
            if needed + cost > budget:
                break
            needed += cost
            items.update((item.index, item) for item in unit_items)
            start, protected = unit, protected + 1

        replaced, spent = self._share(items, budget - reserve)
        spare = budget - reserve - spent

        # Older exchanges, whole, while they fit: the walk stops at the first that does not.
        while start > system:
            unit = self._unit_start(start, system)
            cost = 0 if unit in items else ledger.cost(unit, start)
            if cost > spare:
                break
            spare -= cost
            start = unit

        gaps = self._gaps(system, start, pinned)
        spare += reserve - self.header_cost * len(gaps)
        excerpts = self._excerpts(gaps, spare)

        # In order: the instructions, markers and pinned messages before the tail, the tail.
        pieces: list[tuple[int, Message, int]] = []
        for gap in gaps:
            stand_in = marker(ledger.roles(*gap), ledger.size(*gap), gap, excerpts.get(gap, []))
            pieces.append((gap[0], stand_in, self.measure.text(stand_in.content)))
        for index in pinned:
            if index < start:
                message = replaced.get(index, messages[index])
                pieces.append((index, message, self._cost(index, message)))
        pieces.sort(key=lambda piece: piece[0])
        view = list(messages[:system])
        view += [message for _, message, _ in pieces]
        cost = base + sum(piece_cost for _, _, piece_cost in pieces)
        offset = len(view) - start
        view += messages[start:]
        cost += ledger.cost(start, n)
        for index, message in replaced.items():
            if index >= start:
                view[offset + index] = message
                cost += self._cost(index, message) - ledger.cost(index, index + 1)
        return view, cost

    # -- pieces ----------------------------------------------------------------------------

    def _pinned(self, system: int) -> list[int]:
        """The goal and the latest request."""
        messages, ledger = self.messages, self.ledger
        goal = self.owner.goal() if self.owner.goal is not None else None
        if goal is None or not system <= goal < len(messages) or messages[goal].role != "user":
            goal = ledger.first_user
        return sorted({i for i in (goal, ledger.last_user) if i is not None})

    def _unit_start(self, end: int, floor: int) -> int:
        """The first index of the unit ending before ``end``: an assistant message with tool
        calls and the tool results after it go together; anything else stands alone."""
        messages = self.messages
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

    def _gaps(self, system: int, start: int, pinned: Sequence[int]) -> list[tuple[int, int]]:
        """The runs of left-out messages: ``[system, start)`` without the pinned ones."""
        gaps, cursor = [], system
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
        self, gaps: Sequence[tuple[int, int]], spare: int
    ) -> dict[tuple[int, int], list[tuple[Message, Excerpt]]]:
        """Excerpts of the newest left-out messages, newest first, while they fit."""
        found: dict[tuple[int, int], list[tuple[Message, Excerpt]]] = {}
        left = self.config.max_excerpts
        counter = self.measure.counter
        for gap in reversed(gaps):
            for index in range(gap[1] - 1, gap[0] - 1, -1):
                if left <= 0:
                    return found
                message = self.messages[index]
                text = render(message)
                excerpt = cut(text, self.config.excerpt_chars)
                cost = counter(excerpt_block(message, excerpt)) + 1  # +1: the joining blank line
                if cost > spare:
                    # Use what is left for a shorter excerpt, then stop.
                    label = counter(excerpt_block(message, whole(""))) + 1
                    shorter = fit(text, spare - label + self.measure.overhead, self.measure)
                    if shorter is None:
                        return found
                    cost = counter(excerpt_block(message, shorter)) + 1
                    if cost > spare:
                        return found
                    excerpt, left = shorter, 0
                spare -= cost
                left -= 1
                found.setdefault(gap, []).insert(0, (message, excerpt))
        return found

    def _cost(self, index: int, message: Message) -> int:
        if message is self.messages[index]:
            return self.ledger.cost(index, index + 1)
        return self.measure.text(message.content)  # a cut copy

    def _what(self, system: int) -> str:
        tokens = self.owner.calibration.tokens
        return (
            f"the system instructions ({tokens(self.ledger.cost(0, system)):,} tokens) and tool"
            f" schemas ({tokens(self.fixed):,} tokens)"
        )

    def _overflow(self, required: int, what: str) -> ContextOverflow:
        owner, need = self.owner, self.owner.calibration.tokens(required)
        where = f"the input allowance of {self.allowance:,} tokens"
        if owner.window is not None:
            where += (
                f" (context window {owner.window:,} minus {owner.reserve or 0:,} reserved for"
                " the response)"
            )
        message = (
            f"{what} need {need:,} tokens, more than {where}; dropping the task cannot resolve"
            " this: shorten the system prompt, offer fewer tools or reserve fewer output tokens"
            " (llm.max_tokens)"
        )
        return ContextOverflow(message, required=need, allowance=self.allowance, limit=owner.window)
