"""Public names of the run engine and of what per-run hooks return."""

from ._contracts import (
    Compactor,
    ContextOverflow,
    PassThrough,
    ProgressDetector,
    Verdict,
)
from ._engine import (
    Run,
    RunRequest,
    RunResult,
    RunStop,
    Status,
    ToolOutcome,
    Verification,
    is_progress_only,
)
from ._tools import Tool, schema_of, validate_arguments

__all__ = [
    "Compactor",
    "ContextOverflow",
    "PassThrough",
    "ProgressDetector",
    "Run",
    "RunRequest",
    "RunResult",
    "RunStop",
    "Status",
    "Tool",
    "ToolOutcome",
    "Verdict",
    "Verification",
    "is_progress_only",
    "schema_of",
    "validate_arguments",
]
