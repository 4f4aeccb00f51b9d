"""What the model and the store get of a tool call's outcome: its text cut to
``runtime.max_tool_result_chars``, whether the tool ran or a person gave the result of a call
cut while it ran (the effect ledger)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel.engine import ToolOutcome

if TYPE_CHECKING:
    from soulacy.kernel.policy import ExecutionPolicy


def capped(outcome: ToolOutcome, policy: ExecutionPolicy) -> ToolOutcome:
    """The outcome with its text cut to ``max_tool_result_chars`` (the policy plugin's
    declared limit): its start and end, and a line saying how much was left out. What the
    store keeps is what the model sees; the structured value, for progress, stays whole."""
    limit = policy.extra.get("max_tool_result_chars")
    content = outcome.content
    if limit is None or limit.value is None or len(content) <= limit.value:
        return outcome
    keep = int(limit.value)
    head, tail = content[: keep * 2 // 3], content[len(content) - keep // 3 :]
    omitted = len(content) - len(head) - len(tail)
    marker = (
        f"\n[soulacy] {omitted} of {len(content)} characters of this tool result are left out"
        " (runtime.max_tool_result_chars)\n"
    )
    return ToolOutcome(head + marker + tail, outcome.is_error, outcome.value)
