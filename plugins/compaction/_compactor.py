"""The builtin compactor: extractive, no model call, bounded work per model call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel.messages import Message, ToolSpec

from ._config import CompactionConfig
from ._ledger import Ledger
from ._plan import Plan
from ._tokens import Calibration, CharEstimate, Measure, TokenCounter

if TYPE_CHECKING:
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ModelRequest

COMPACTED = "context.compacted"  # the event of a compaction


@attrs.frozen
class Compaction:
    """One view that was shorter than the run's messages: what the ``context.compacted`` event
    says. Tokens are the compactor's calibrated estimates, the tool schemas included."""

    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    allowance: int

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class ExtractiveCompactor:
    """Builds the view sent to the model from the run's messages, under an input allowance.

    Under the allowance the messages go as they are (the same list). Over it, the view keeps the
    system instructions, the goal (``goal()``, else the first user message), the latest request
    (the last user message) and the newest exchanges, and replaces each run of older messages
    by a marker message with exact counts and excerpts. Nothing in ``messages`` is changed.

    One instance serves one run: it measures each message once (see :class:`Ledger`). The last
    compaction not yet announced is :attr:`unannounced` (see :meth:`take_compaction`).
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
        self.unannounced: Compaction | None = None

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
        view, cost = Plan(self, messages, fixed, limit, allowance).build()
        self._last = (view, len(view), cost)
        tokens = self.calibration.tokens
        self.unannounced = Compaction(
            len(messages), len(view), tokens(total), tokens(cost), allowance
        )
        return view

    def take_compaction(self) -> Compaction | None:
        """The compaction of the last :meth:`compact` call, once (None when it sent the
        messages as they are, or was taken already)."""
        found, self.unannounced = self.unannounced, None
        return found

    def before_model_call(self, run: Run, request: ModelRequest) -> Awaitable[None] | None:
        """As the run's participant (the engine adds its compactor): the awaited moment
        between building a call's view and the call (``compact`` is synchronous), where the
        compaction it made is announced as a ``context.compacted`` event. Never refuses."""
        compaction = self.take_compaction()
        if compaction is None:
            return None
        return _announce(run, compaction)

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


async def _announce(run: Run, compaction: Compaction) -> None:
    await run.emit(COMPACTED, {"turn": run.result.turns, **compaction.to_dict()})
