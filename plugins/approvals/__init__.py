"""The builtin ``approvals`` plugin: a person approves chosen tool calls before they run.

An agent lists the tools whose calls wait for approval in its SOUL.yaml (the original
format's key)::

    confirm_tools: [delete_file, send_mail]

Each such call pauses its run: the run stores the request (the store's approval role), emits
``tool.approval`` (also on the SSE stream) and waits, durably, for ``POST
/api/v1/chat/confirm`` or ``soulacy runs approve|deny RUN CALL``, in any process sharing the
store (a call the effect ledger found cut while it ran may also be told it happened:
``soulacy runs happened RUN cut:CALL --result TEXT``). An approved call runs; a denied one goes
back to the model as a refusal naming who denied it; the decision is a receipt of the run's
proof. Other plugins choose calls too, by answering ``soulacy_tool_approval``. Workspace
settings::

    approvals:
      wait_counts_against_timeout: true   # false: the wait does not use up runtime.timeouts.run

See docs/approvals.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import CliCommand, StashKey, hookimpl, lazy_exports

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, ConfigIssue, ConfigSection, Kernel, Service
    from soulacy.kernel.contracts import ApprovalKeeper, RunParticipant
    from soulacy.kernel.contracts import Decided as Decided  # its home; kept here for callers
    from soulacy.kernel.engine import Run

    from ._keeper import (
        EXPIRED_APPROVER,
        ApprovalClosed,
        ApprovalMismatch,
        ApprovalResultRefused,
        Approvals,
        approval_store,
        approvals_of,
        expiry,
        wait_counts_against_timeout,
    )
    from ._settings import ApprovalsConfig

__all__ = [
    "EXPIRED_APPROVER",
    "ApprovalClosed",
    "ApprovalMismatch",
    "ApprovalResultRefused",
    "Approvals",
    "ApprovalsConfig",
    "Decided",
    "approval_store",
    "approvals_of",
    "expiry",
    "wait_counts_against_timeout",
]

_HERE = "soulacy.plugins.approvals"


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(
        __name__,
        {name: "._settings" if name == "ApprovalsConfig" else "._keeper" for name in __all__},
    )


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._settings import ApprovalsConfig

    return [
        ConfigSection("approvals", ApprovalsConfig, doc="human approval of tool calls"),
        ConfigSection(
            "confirm_tools",
            list[str],
            scope="agent",
            default=list,
            doc="tools whose calls wait for a person's approval",
        ),
    ]


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    from ._checks import confirm_tools_issues

    return confirm_tools_issues(kernel, agent)


# The confirm_tools of each agent of a kernel, with the AgentSpec they were read from: asked
# before every tool call, they are read once per spec. A reloaded configuration makes new specs
# (a spec never changes), and only each agent's latest is kept.
_CONFIRMED = StashKey[dict[str, tuple["AgentSpec", frozenset[str]]]]("approvals confirm_tools")


def _confirm_tools(kernel: Kernel, agent: AgentSpec) -> frozenset[str]:
    cache = kernel.stash.get(_CONFIRMED, None)
    if cache is None:
        cache = kernel.stash[_CONFIRMED] = {}
    entry = cache.get(agent.id)
    if entry is not None and entry[0] is agent:
        return entry[1]
    names = frozenset(agent.section("confirm_tools") or ())
    cache[agent.id] = (agent, names)
    return names


@hookimpl
def soulacy_run_participants(kernel: Kernel, run: Run) -> list[RunParticipant] | None:
    names = _confirm_tools(kernel, run.agent)  # decided once per run
    if not names:
        return None
    from ._participant import Confirm

    return [Confirm(names)]


@hookimpl
def soulacy_approval_keeper(kernel: Kernel) -> ApprovalKeeper:
    from ._keeper import approvals_of

    return approvals_of(kernel)


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    # Where runs resumed by an HTTP decision run; a kernel that serves no HTTP needs none
    # (the command line resumes in the command, embedded callers with Approvals.resume).
    if not kernel.pm.has_plugin("http"):
        return []
    from ._service import resume_service

    return [resume_service(kernel)]


@hookimpl(optionalhook=True)
def soulacy_http_routes(kernel: Kernel) -> Sequence[Any]:
    from ._http import routes  # the HTTP plugin's types, only when it is loaded

    return routes(kernel)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    # Declared by name (decision 0036): `soulacy --help` imports none of what they do.
    return [
        CliCommand(
            "runs approve",
            "approve a tool call a run waits on (resuming the run if its process is gone)",
            f"{_HERE}._commands:approve",
            f"{_HERE}._args:configure_decide",
        ),
        CliCommand(
            "runs deny",
            "deny a tool call a run waits on: the model is told who denied it",
            f"{_HERE}._commands:deny",
            f"{_HERE}._args:configure_decide",
        ),
        CliCommand(
            "runs happened",
            "tell a call cut by a crash that it happened, with its result: it is not run again",
            f"{_HERE}._commands:happened",
            f"{_HERE}._args:configure_happened",
        ),
        CliCommand(
            "runs approvals",
            "tool calls waiting for approval (or every request with --all)",
            f"{_HERE}._commands:approvals_list",
            f"{_HERE}._args:configure_list",
            read_only=True,
        ),
    ]
