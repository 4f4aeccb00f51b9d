"""The configuration keys the execution policy owns, and the resolved policy itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from soulacy.kernel import Duration, format_duration

T = TypeVar("T", int, float)

# -- config.yaml ------------------------------------------------------------------------------


@attrs.frozen
class Budget:
    """Tokens and model calls per run; 0 means unlimited for that dimension."""

    max_tokens: int = 0
    max_llm_calls: int = 0


@attrs.frozen
class Timeouts:
    """Per-operation deadlines; ``"0"`` means no deadline (0 counts as infinity in the order)."""

    tool: Duration = Duration(120)
    llm: Duration = Duration(300)
    step: Duration = Duration(600)
    run: Duration = Duration(48 * 3600)
    http: Duration = Duration(48 * 3600 + 60)


@attrs.frozen
class RuntimeConfig:
    """``runtime:`` in config.yaml."""

    default_max_turns: int = 256
    max_turns_ceiling: int = 0
    default_budget: Budget = Budget()
    max_budget: Budget = Budget()
    timeouts: Timeouts = Timeouts()
    no_progress_limit: int = 20


@attrs.frozen
class CostsConfig:
    """``costs:`` in config.yaml (per-response output allowances)."""

    default_max_output_tokens: int = 16384
    max_output_tokens_ceiling: int = 0


@attrs.frozen
class StudioConfig:
    """``llm.studio:`` in config.yaml: allowances of one Studio build."""

    max_build_tokens: int = 0
    max_build_cost_usd: float = 0.0
    max_build_attempts: int = 32
    max_build_elapsed: Duration = Duration(48 * 3600)


DEFAULT_MAX_BUILD_ATTEMPTS = 32

# -- SOUL.yaml and requests -------------------------------------------------------------------


@attrs.frozen
class AgentBudget:
    """``budget:`` in SOUL.yaml or a request. An omitted dimension inherits; 0 is unlimited."""

    max_tokens: int | None = None
    max_llm_calls: int | None = None


@attrs.frozen
class Reasoning:
    """``reasoning:`` in SOUL.yaml. ``max_steps``: omitted inherits, -1 is unlimited."""

    strategy: str | None = None
    max_steps: int | None = None
    step_timeout: Duration | None = None
    total_timeout: Duration | None = None


@attrs.frozen
class RequestOverrides:
    """What one request may ask for; the same semantics as the agent keys of the same name."""

    max_turns: int | None = None
    budget: AgentBudget | None = None
    run_timeout: Duration | None = None
    max_output_tokens: int | None = None
    no_progress_limit: int | None = None
    reasoning_max_steps: int | None = None


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
