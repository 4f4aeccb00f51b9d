"""The deprecated per-turn hooks, which the engine still calls for one release through its
adapters (added with ``soulacy_addhooks``; the engine is essential, so they are always defined).

Each warns when a plugin implements it: a plugin takes part in a run's turns by returning a
participant from ``soulacy_run_participants`` (:class:`soulacy.kernel.contracts.RunParticipant`;
docs/decisions/0061-per-run-participants.md), and answers the per-run factory hooks by their
role's name (``soulacy_compactor``, ``soulacy_progress_detector``). The engine owns the adapters
(``DeprecatedHooks`` and the ``soulacy_make_*`` lookup), so it owns these specifications too;
they go with the adapters in the next release.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookspec

if TYPE_CHECKING:
    from soulacy.kernel import Kernel
    from soulacy.kernel.contracts import Compactor, ProgressDetector
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import Usage


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------


@hookspec(
    warn_on_impl=DeprecationWarning(
        "soulacy_tool_permission is deprecated: return a participant from soulacy_run_participants"
        " (before_tool_call); it is called through an adapter for one release"
    )
)
def soulacy_tool_permission(
    kernel: Kernel, agent_id: str, tool_name: str, arguments: Mapping[str, Any]
) -> bool | None:
    """Deprecated (a participant's ``before_tool_call``). Decide whether a tool call may run:
    ``True``, ``False``, or ``None`` to let others decide.

    Called before every tool call. Every plugin is asked and a deny wins: one ``False`` refuses
    the call whatever the others answer (so the order plugins load in never lets one plugin's
    allow hide another's deny); with no ``False`` the call runs.
    """


@hookspec(
    warn_on_impl=DeprecationWarning(
        "soulacy_tool_approval is deprecated: return a participant from soulacy_run_participants"
        " (needs_approval); it is called through an adapter for one release"
    )
)
def soulacy_tool_approval(
    kernel: Kernel, run: Run, tool_name: str, arguments: Mapping[str, Any], call_id: str
) -> str | None:
    """Deprecated (a participant's ``needs_approval``). Say why a tool call needs a person's
    approval before it runs (a reason, such as
    ``"confirm_tools lists 'delete'"``), or ``None`` when it does not as far as this plugin is
    concerned.

    Called before every tool call that validated and that ``soulacy_tool_permission`` allowed,
    never for a call replayed from its stored record. Every plugin is asked and any reason
    wins: the run stores an approval request, emits ``tool.approval`` and waits, durably,
    until the call is approved (it runs) or denied (the model gets a refusal naming who
    denied it). The builtin ``approvals`` plugin answers for the tools an agent's
    ``confirm_tools`` lists; see docs/approvals.md.
    """


# --------------------------------------------------------------------------------------------
# Budgets and accounting
# --------------------------------------------------------------------------------------------


@hookspec(
    warn_on_impl=DeprecationWarning(
        "soulacy_usage is deprecated: return a participant from soulacy_run_participants"
        " (after_model_call); it is called through an adapter for one release"
    )
)
def soulacy_usage(kernel: Kernel, run: Run, provider: str, model: str | None, usage: Usage) -> None:
    """Deprecated (a participant's ``after_model_call``). Observe the usage of one model call
    of ``run`` (for quotas and accounting).

    Called after every model call, after ``run.result.cost_usd`` was updated. Every
    implementation is called.
    """


@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "soulacy_check_budget is deprecated: return a participant from soulacy_run_participants"
        " (before_model_call); it is called through an adapter for one release"
    ),
)
def soulacy_check_budget(kernel: Kernel, run: Run) -> str | None:
    """Deprecated (a participant's ``before_model_call``). Return a reason (such as
    ``max_cost_usd`` or ``token_quota``) to end ``run`` as incomplete before its next model
    call, or None to let it go on.

    Called at every turn boundary, after the policy's own limits; these budgets stay in force
    when turns and tokens are unlimited. The first non-None answer wins.
    """


@hookspec(
    warn_on_impl=DeprecationWarning(
        "soulacy_admit_model_call is deprecated: return a participant from soulacy_run_participants"
        " (before_model_call); it is called through an adapter for one release"
    )
)
def soulacy_admit_model_call(kernel: Kernel, run: Run) -> Awaitable[str | None] | str | None:
    """Deprecated (a participant's ``before_model_call``). Admit the model call ``run`` is
    about to make, or refuse it with a reason: the run then ends ``incomplete`` with that
    reason and the call is not made.

    Called before every model call, after its request is built and before the ``llm.call``
    event. Every plugin is asked; an answer may be awaitable (a budget shared by several
    processes reserves its estimate in the store), and every awaitable is awaited, so that a
    plugin that reserved learns of the refusal at the ``run.completed`` event. The first
    refusal, in hook order, wins.
    """


# --------------------------------------------------------------------------------------------
# Compaction and progress detection
# --------------------------------------------------------------------------------------------


@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "soulacy_make_compactor is renamed soulacy_compactor (factory hooks are named by the"
        " role they return); the old name is still asked, first, for one release"
    ),
)
def soulacy_make_compactor(kernel: Kernel, run: Run) -> Compactor | None:
    """Deprecated name of ``soulacy_compactor``."""


@hookspec(
    firstresult=True,
    warn_on_impl=DeprecationWarning(
        "soulacy_make_progress_detector is renamed soulacy_progress_detector (factory hooks are"
        " named by the role they return); the old name is still asked, first, for one release"
    ),
)
def soulacy_make_progress_detector(kernel: Kernel, run: Run) -> ProgressDetector | None:
    """Deprecated name of ``soulacy_progress_detector``."""
