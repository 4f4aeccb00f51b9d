"""The token estimate, defined once, and its calibration against what providers report.

A counter turns a text into tokens. The default divides characters by ``chars_per_token``; a
plugin may supply an exact tokenizer through ``soulacy_compaction_token_counter``. Whatever the
counter, a message costs ``message_overhead_tokens`` plus the tokens of :func:`render`, and the
estimate is scaled by a ratio learnt from the provider's reported input tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from soulacy.kernel import json_encoder
from soulacy.kernel.messages import Message, ToolSpec

TokenCounter = Callable[[str], int]

# Calibration: each observation moves the ratio 30% of the way; the ratio stays within bounds
# so that one odd report (a provider counting cached input differently) cannot wreck budgets.
SMOOTHING = 0.3
MIN_RATIO = 0.5
MAX_RATIO = 4.0


@attrs.frozen
class CharEstimate:
    """The default counter: ``ceil(len(text) / chars_per_token)``."""

    chars_per_token: float = 4.0

    def __call__(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)


# One encoder for every measurement: json.dumps with options builds a new one per call.
_json = json_encoder(ensure_ascii=False, sort_keys=True, default=str)


def render(message: Message) -> str:
    """A message as measured and excerpted: its content, then one line per tool call.

    Its length is what markers call the message's characters.
    """
    tool_calls = message.tool_calls
    if not tool_calls:
        return message.content
    if len(tool_calls) == 1:  # most replies: no generator and join
        calls = f"→ {tool_calls[0].name}({_json(tool_calls[0].arguments)})"
    else:
        calls = "\n".join(f"→ {call.name}({_json(call.arguments)})" for call in tool_calls)
    return f"{message.content}\n{calls}" if message.content else calls


@attrs.frozen
class Measure:
    """Token costs in raw (uncalibrated) estimate units."""

    counter: TokenCounter
    overhead: int = 4

    def text(self, text: str) -> int:
        """The cost of a message whose rendered text is ``text``."""
        return self.overhead + self.counter(text)

    def message(self, message: Message) -> tuple[int, int]:
        """(characters, tokens) of one message."""
        text = render(message)
        return len(text), self.text(text)

    def tools(self, tools: Sequence[ToolSpec]) -> int:
        return sum(
            self.text(f"{t.name}\n{t.description}\n{_json(dict(t.parameters))}") for t in tools
        )


@attrs.define
class Calibration:
    """Learns ``reported / estimated`` input tokens as an exponentially smoothed, bounded ratio."""

    ratio: float = 1.0

    def observe(self, estimated: int, reported: int) -> None:
        if estimated <= 0 or reported <= 0:
            return
        seen = reported / estimated
        smoothed = (1 - SMOOTHING) * self.ratio + SMOOTHING * seen
        self.ratio = min(MAX_RATIO, max(MIN_RATIO, smoothed))

    def budget(self, allowance: int) -> int:
        """An allowance in provider tokens, in raw estimate units."""
        return math.floor(allowance / self.ratio)

    def tokens(self, raw: int) -> int:
        """Raw estimate units in provider tokens."""
        return math.ceil(raw * self.ratio)
