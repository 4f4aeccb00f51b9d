"""The resolved execution policy: the contract between the policy hook and the run engine.

Every value carries its source, and unlimited is explicit (``Limit.value`` is None and
``Limit.unlimited`` is True): no magic 0 reaches a caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from ._durations import format_duration

__all__ = [
    "AGENT",
    "CEILING",
    "CONFIG",
    "DEFAULT",
    "DURATION_FIELDS",
    "ENVIRONMENT",
    "MODEL",
    "REQUEST",
    "ExecutionPolicy",
    "Limit",
    "ModelCapacity",
]

T = TypeVar("T", int, float)


@attrs.frozen
class ModelCapacity:
    """What a model can take and give: the limits no policy can raise."""

    context_window: int | None = None
    max_output_tokens: int | None = None


# -- the resolved policy ----------------------------------------------------------------------

DEFAULT = "default"
CONFIG = "config.yaml"
AGENT = "SOUL.yaml"
REQUEST = "request"
CEILING = "ceiling"
MODEL = "model capacity"
ENVIRONMENT = "environment"


@attrs.frozen
class Limit(Generic[T]):
    """One resolved limit. ``value`` None means unlimited, said explicitly by ``unlimited``."""

    value: T | None
    source: str
    location: str | None = None  # file:line or environment variable that set it
    reason: str | None = None  # why a ceiling, capacity or rule won over what was asked

    @property
    def unlimited(self) -> bool:
        return self.value is None

    def to_dict(self, *, duration: bool = False) -> dict[str, Any]:
        shown: Any = "unlimited" if self.value is None else self.value
        out: dict[str, Any] = {
            "value": shown,
            "unlimited": self.value is None,
            "source": self.source,
        }
        if duration and self.value is not None:
            out["text"] = format_duration(self.value)
        if self.location:
            out["location"] = self.location
        if self.reason:
            out["reason"] = self.reason
        return out

    def __str__(self) -> str:
        return "unlimited" if self.value is None else str(self.value)


DURATION_FIELDS = frozenset(
    {
        "run_timeout",
        "http_timeout",
        "llm_timeout",
        "step_timeout",
        "tool_timeout",
        "reasoning_step_timeout",
        "reasoning_total_timeout",
        "max_build_elapsed",
    }
)


@attrs.frozen
class ExecutionPolicy:
    """The execution policy of one run: every limit with where it came from.

    Durations are in seconds. Published as the ``run.limits`` event at the start of a run and
    shown by ``soulacy policy show``.
    """

    agent_id: str
    max_turns: Limit[int]
    max_tokens: Limit[int]
    max_llm_calls: Limit[int]
    max_output_tokens: Limit[int]
    reasoning_max_steps: Limit[int]
    no_progress_limit: Limit[int]
    run_timeout: Limit[float]
    http_timeout: Limit[float]
    llm_timeout: Limit[float]
    step_timeout: Limit[float]
    tool_timeout: Limit[float]
    reasoning_step_timeout: Limit[float]
    reasoning_total_timeout: Limit[float]
    max_build_tokens: Limit[int]
    max_build_cost_usd: Limit[float]
    max_build_attempts: Limit[int]
    max_build_elapsed: Limit[float]
    context_window: Limit[int]

    def limits(self) -> Mapping[str, Limit[Any]]:
        return {
            a.name: getattr(self, a.name) for a in attrs.fields(type(self)) if a.name != "agent_id"
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"agent_id": self.agent_id}
        for name, limit in self.limits().items():
            out[name] = limit.to_dict(duration=name in DURATION_FIELDS)
        return out
