"""Public names of human approval of tool calls: a kernel's waiting runs and decisions.

The records and the store role are in :mod:`soulacy.kernel.store` (``ApprovalRequest``,
``ApprovalDecision``, ``ApprovalStore``, ``AlreadyDecided``); which calls need approval is the
``soulacy_tool_approval`` hook's (the builtin ``approvals`` plugin answers for
``confirm_tools``). See docs/approvals.md.
"""

from ._approvals import (
    EXPIRED_APPROVER,
    ApprovalClosed,
    ApprovalMismatch,
    Approvals,
    Decided,
    approval_store,
    approvals_of,
    expiry,
    wait_counts_against_timeout,
)

__all__ = [
    "EXPIRED_APPROVER",
    "ApprovalClosed",
    "ApprovalMismatch",
    "Approvals",
    "Decided",
    "approval_store",
    "approvals_of",
    "expiry",
    "wait_counts_against_timeout",
]
