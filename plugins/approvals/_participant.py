"""The approvals plugin's part in a run: the calls ``confirm_tools`` lists wait for a person."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel.contracts import RunParticipant

if TYPE_CHECKING:
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ToolCall


class Confirm(RunParticipant):
    """Asks for approval of every call of the tools an agent's ``confirm_tools`` lists."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def needs_approval(self, run: Run, call: ToolCall) -> str | None:
        return f"confirm_tools lists {call.name!r}" if call.name in self.names else None
