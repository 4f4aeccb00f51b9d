"""The plugins that take part in one run, asked once per run, called as plain methods each
turn (docs/decisions/0061-per-run-participants.md).

``soulacy_run_participants`` decides *who* takes part, through pluggy, once; a turn then
calls only the methods the participants define (the no-ops of ``RunParticipant`` are not
called), so a run nobody takes part in pays for no call at all. The per-turn hooks they
replace still work for one release, through :class:`DeprecatedHooks`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel.contracts import RunParticipant

if TYPE_CHECKING:
    from soulacy.kernel import Kernel
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ModelReply, ModelRequest, ToolCall

log = logging.getLogger("soulacy.engine")

PARTICIPANT_METHODS = (
    "before_model_call",
    "after_model_call",
    "before_tool_call",
    "needs_approval",
    "after_tool_call",
    "run_ended",
)

# The per-turn hooks that participants replace; each is called through DeprecatedHooks, and
# only when some plugin still implements it.
DEPRECATED_HOOKS = (
    "soulacy_admit_model_call",
    "soulacy_check_budget",
    "soulacy_usage",
    "soulacy_tool_permission",
    "soulacy_tool_approval",
)


class Participants:
    """A run's participants, as lists of the bound methods each turn calls."""

    __slots__ = PARTICIPANT_METHODS

    def __init__(self) -> None:
        for name in PARTICIPANT_METHODS:
            setattr(self, name, [])

    before_model_call: list[Callable[..., Any]]
    after_model_call: list[Callable[..., Any]]
    before_tool_call: list[Callable[..., Any]]
    needs_approval: list[Callable[..., Any]]
    after_tool_call: list[Callable[..., Any]]
    run_ended: list[Callable[..., Any]]

    def add(self, participant: object) -> None:
        """Take the methods ``participant`` defines (not RunParticipant's no-ops)."""
        kind = type(participant)
        for name in PARTICIPANT_METHODS:
            if getattr(kind, name, None) is getattr(RunParticipant, name):
                continue  # the base class's no-op: never called
            method = getattr(participant, name, None)
            if method is not None:
                getattr(self, name).append(method)

    @classmethod
    def of(cls, kernel: Kernel, run: Run) -> Participants:
        found = cls()
        for answer in kernel.hook.soulacy_run_participants(kernel=kernel, run=run):
            for participant in _flat(answer):
                found.add(participant)
        implemented = {
            name: bool(getattr(kernel.hook, name).get_hookimpls()) for name in DEPRECATED_HOOKS
        }
        if any(implemented.values()):
            found.add(DeprecatedHooks(kernel, implemented))
        return found

    async def refusal(self, methods: list[Callable[..., Any]], *args: Any) -> str | None:
        """Ask each method; every awaitable answer is awaited; the first reason wins."""
        refusal: str | None = None
        for method in methods:
            answer = method(*args)
            if inspect.isawaitable(answer):
                answer = await answer
            refusal = refusal or answer
        return refusal

    async def ended(self, run: Run) -> None:
        for method in self.run_ended:
            try:
                answer = method(run)
                if inspect.isawaitable(answer):
                    await answer
            except Exception:
                log.exception("a participant's run_ended failed (run %s)", run.run_id)


NO_PARTICIPANTS = Participants()  # a run's until it asked: its lists stay empty


def _flat(answer: object) -> Iterable[object]:
    if answer is None:
        return ()
    if isinstance(answer, list | tuple):
        return answer
    return (answer,)


class DeprecatedHooks(RunParticipant):
    """The per-turn hooks of earlier releases, as one participant (deprecated: each warns when
    a plugin implements it; see docs/hooks.md)."""

    def __init__(self, kernel: Kernel, implemented: Mapping[str, bool]) -> None:
        self.kernel = kernel
        self.hook = kernel.hook
        self.implemented = implemented

    async def before_model_call(self, run: Run, request: ModelRequest) -> str | None:
        kernel, hook = self.kernel, self.hook
        if self.implemented["soulacy_check_budget"]:
            reason: str | None = hook.soulacy_check_budget(kernel=kernel, run=run)
            if reason:
                return reason
        refusal: str | None = None
        if self.implemented["soulacy_admit_model_call"]:
            for answer in hook.soulacy_admit_model_call(kernel=kernel, run=run):
                if inspect.isawaitable(answer):
                    answer = await answer
                refusal = refusal or answer
        return refusal

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        if self.implemented["soulacy_usage"]:
            self.hook.soulacy_usage(
                kernel=self.kernel, run=run, provider=provider, model=model, usage=reply.usage
            )

    def before_tool_call(self, run: Run, call: ToolCall) -> str | None:
        if not self.implemented["soulacy_tool_permission"]:
            return None
        answers = self.hook.soulacy_tool_permission(
            kernel=self.kernel, agent_id=run.agent_id, tool_name=call.name, arguments=call.arguments
        )
        if False in answers:  # every plugin is asked, and one deny wins over any allow
            return f"permission denied for tool {call.name!r}"
        return None

    def needs_approval(self, run: Run, call: ToolCall) -> str | None:
        if not self.implemented["soulacy_tool_approval"]:
            return None
        answers = self.hook.soulacy_tool_approval(
            kernel=self.kernel,
            run=run,
            tool_name=call.name,
            arguments=call.arguments,
            call_id=call.id,
        )
        reasons = [str(reason) for reason in answers if reason]
        return "; ".join(reasons) or None
