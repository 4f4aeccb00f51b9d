"""Public names of running: the run object strategies drive (a protocol the builtin ``engine``
plugin implements), its stops and outcomes, and the runner and lease keeper a kernel asks the
``soulacy_runner`` hook for.

The request and the result of a run (``RunRequest``, ``RunResult``, ``RunHandle``) and
``Tool`` are exported from :mod:`soulacy.kernel`, where callers of ``Kernel.run`` find them.
The contracts of what per-run hooks return (compactor, progress detector, verdicts, run
strategies) are in :mod:`soulacy.kernel.contracts`.
"""

from __future__ import annotations

from ._runs import (
    AWAITING_APPROVAL,
    SHUTDOWN,
    ContinueOptions,
    HeldLease,
    LeaseKeeper,
    Run,
    Runner,
    RunStop,
    Status,
    Timeouts,
    ToolOutcome,
    Verification,
    VerificationStatus,
    new_id,
)
from ._tools import in_tool_call, schema_of, validate_arguments

__all__ = [
    "AWAITING_APPROVAL",
    "SHUTDOWN",
    "ContinueOptions",
    "HeldLease",
    "LeaseKeeper",
    "Run",
    "RunStop",
    "Runner",
    "Status",
    "Timeouts",
    "ToolOutcome",
    "Verification",
    "VerificationStatus",
    "in_tool_call",
    "new_id",
    "schema_of",
    "validate_arguments",
]
