"""Public names of the run engine: the run object strategies drive, its stops and outcomes.

The request and the result of a run (``RunRequest``, ``RunResult``) and ``Tool`` are exported
from :mod:`soulacy.kernel`, where callers of ``Kernel.run`` find them. The contracts of what
per-run hooks return (compactor, progress detector, verdicts, run strategies) are in
:mod:`soulacy.kernel.contracts`.
"""

from __future__ import annotations

from ._engine import Run, RunStop, Status, ToolOutcome, Verification
from ._tools import schema_of, validate_arguments

__all__ = [
    "Run",
    "RunStop",
    "Status",
    "ToolOutcome",
    "Verification",
    "schema_of",
    "validate_arguments",
]
