"""Sizes of the run's message list, measured once per message.

The engine only ever appends to ``run.messages``, so each message is measured when it first
appears and prefix sums answer "how big is messages[i:j]" (tokens, characters, messages per role)
in constant time. A call then costs what was appended since the last one, not the whole history.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from soulacy.kernel.messages import Message

from ._tokens import Measure

ROLES = ("user", "assistant", "tool", "system")


class Ledger:
    def __init__(self, measure: Measure) -> None:
        self.measure = measure
        self._reset()

    def _reset(self) -> None:
        # Prefix sums: tokens[i] is the cost of messages[:i].
        self.tokens = [0]
        self.chars = [0]
        self.positions: dict[str, list[int]] = {role: [] for role in ROLES}  # indexes by role
        self.system_prefix = 0  # leading system messages: the instructions
        self.first_user: int | None = None  # first user message after the instructions
        self.last_user: int | None = None
        self._first: Message | None = None
        self._last: Message | None = None

    def __len__(self) -> int:
        return len(self.tokens) - 1

    def sync(self, messages: Sequence[Message]) -> None:
        """Measure what was appended since the last call; start over on another list."""
        known = len(self)
        if known and (
            len(messages) < known
            or messages[known - 1] is not self._last
            or messages[0] is not self._first
        ):
            self._reset()
            known = 0
        for index in range(known, len(messages)):
            self._add(index, messages[index])

    def _add(self, index: int, message: Message) -> None:
        chars, tokens = self.measure.message(message)
        self.tokens.append(self.tokens[-1] + tokens)
        self.chars.append(self.chars[-1] + chars)
        positions = self.positions.get(message.role)
        if positions is not None:
            positions.append(index)
        if message.role == "system" and self.system_prefix == index:
            self.system_prefix += 1
        elif message.role == "user":
            if self.first_user is None:
                self.first_user = index
            self.last_user = index
        if index == 0:
            self._first = message
        self._last = message

    def cost(self, start: int, end: int) -> int:
        return self.tokens[end] - self.tokens[start]

    def size(self, start: int, end: int) -> int:
        return self.chars[end] - self.chars[start]

    def roles(self, start: int, end: int) -> dict[str, int]:
        """Messages per role in ``[start, end)``, leaving out roles with none."""
        found = {
            role: bisect_left(positions, end) - bisect_left(positions, start)
            for role, positions in self.positions.items()
        }
        return {role: n for role, n in found.items() if n}
