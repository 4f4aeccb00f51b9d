"""The builtin progress detector: stall detection by tool-result signatures.

A liveness heuristic, not proof of success: it only ever stops a run as ``incomplete`` with
reason ``no_progress``; it never marks a run as successful. Configure it in config.yaml::

    progress:
      window: 30                       # results remembered per run
      volatile_fields: [timestamp, request_id, duration_ms]   # ignored in structured results

The threshold is the resolved ``no_progress_limit`` (20 by default, 0 disables).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from soulacy.kernel import ConfigIssue, ConfigSection, Location, hookimpl

if TYPE_CHECKING:
    from soulacy.kernel import Kernel, Settings
    from soulacy.kernel.engine import Run

from ._detector import SignatureDetector, normalize_text, signature

__all__ = ["ProgressConfig", "SignatureDetector", "normalize_text", "signature"]

DEFAULT_VOLATILE_FIELDS = (
    "timestamp",
    "time",
    "ts",
    "date",
    "now",
    "created",
    "created_at",
    "updated_at",
    "request_id",
    "requestId",
    "trace_id",
    "span_id",
    "duration",
    "duration_ms",
    "elapsed",
    "elapsed_ms",
    "latency_ms",
    "took",
    "etag",
)


@attrs.frozen
class ProgressConfig:
    window: int = 30
    volatile_fields: list[str] = attrs.Factory(lambda: list(DEFAULT_VOLATILE_FIELDS))


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("progress", ProgressConfig, doc="stall detection")]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    window = config.section("progress").window
    if window < 2:
        loc = config.source_of("progress.window") or Location(str(config.file))
        return [ConfigIssue(loc, "progress.window", "expected 2 or more", window, True)]
    return []


@hookimpl
def soulacy_progress_detector(kernel: Kernel, run: Run) -> SignatureDetector:
    config: ProgressConfig = kernel.config.section("progress")
    # The volatile field set of this configuration object, made once: every run asks (a
    # replaced configuration is another object, read again).
    # ProgressConfig holds a list, so it is not hashable: the last one is kept by identity.
    global _volatile
    if _volatile[0] is not config:
        _volatile = (config, frozenset(config.volatile_fields))
    return SignatureDetector(run.policy.no_progress_limit.value, config.window, _volatile[1])


_volatile: tuple[ProgressConfig | None, frozenset[str]] = (None, frozenset())
