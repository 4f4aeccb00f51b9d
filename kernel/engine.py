"""Public names of the run engine: the request, the result and the run object strategies drive.

The contracts of what per-run hooks return (compactor, progress detector, verdicts, run
strategies) are in :mod:`soulacy.kernel.contracts`.
"""

from ._engine import (
    Run,
    RunRequest,
    RunResult,
    RunStop,
    Status,
    ToolOutcome,
    Verification,
)
from ._tools import Tool, schema_of, validate_arguments

__all__ = [
    "Run",
    "RunRequest",
    "RunResult",
    "RunStop",
    "Status",
    "Tool",
    "ToolOutcome",
    "Verification",
    "schema_of",
    "validate_arguments",
]
