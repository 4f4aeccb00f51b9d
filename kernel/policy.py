"""The resolved execution policy: the contract between the policy hook and the run engine.

Every value carries its source, and unlimited is explicit (``Limit.value`` is None and
``Limit.unlimited`` is True): no magic 0 reaches a caller.

The core limits, the ones the run engine enforces, are typed fields of ``ExecutionPolicy``.
A plugin that needs a limit of its own (studio's build allowances, the HTTP deadline) declares
it with ``soulacy_policy_limits`` as a :class:`PolicyLimit`; the policy resolves it beside the
core limits and holds it by name (``policy.limit("max_build_attempts")``). With that plugin
blocked the limit does not exist (decision 0030).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from ._durations import format_duration
from ._errors import PluginError

if TYPE_CHECKING:
    from ._config import Settings
    from ._errors import ConfigIssue
    from ._kernel import Kernel

__all__ = [
    "AGENT",
    "CEILING",
    "CONFIG",
    "CORE_LIMITS",
    "DEFAULT",
    "DURATION_FIELDS",
    "ENVIRONMENT",
    "MODEL",
    "REQUEST",
    "ExecutionPolicy",
    "Limit",
    "ModelCapacity",
    "PolicyLimit",
    "declared_limits",
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


# The core limits that are durations (seconds); a declared limit says so itself.
DURATION_FIELDS = frozenset(
    {
        "run_timeout",
        "llm_timeout",
        "step_timeout",
        "tool_timeout",
        "reasoning_step_timeout",
        "reasoning_total_timeout",
    }
)


@attrs.frozen
class PolicyLimit:
    """A limit a plugin declares (``soulacy_policy_limits``) for the execution policy to
    resolve, check and report beside the core limits, as it does its own.

    The resolver reads the workspace value at ``path`` with its source (config.yaml, the
    environment or the default) and location. ``unlimited_at`` is the configured value that
    means unlimited; a configured ``selects_default`` stands for ``default``, and the resolved
    limit says so. ``default`` is also the value when no loaded plugin owns ``path``. A value
    below ``minimum`` is a configuration error that says ``meaning``. ``duration``: the value is
    in seconds, reported with a text form (``48h1m``). ``adjust(limit, policy)``, if given, is
    the declaring plugin's rule relating the limit to the run's core limits (the HTTP deadline
    carries the run): it returns the final limit, with a reason when it changed it.
    ``check(config)``, if given, is its rule on the workspace configuration (the HTTP timeout
    must outlast the run timeout), run with the policy's own checks: it returns the issues.
    """

    name: str  # the policy's name for it: policy.limit(name), run.limits, policy show
    path: str  # the dotted workspace key it is read from
    default: int | float | None  # None: unlimited
    doc: str = ""
    unlimited_at: Any = 0
    selects_default: Any = None
    minimum: int | float | None = None
    meaning: str = ""
    duration: bool = False
    adjust: Callable[[Limit[Any], ExecutionPolicy], Limit[Any]] | None = attrs.field(
        default=None, repr=False
    )
    check: Callable[[Settings], Iterable[ConfigIssue]] | None = attrs.field(
        default=None, repr=False
    )


@attrs.frozen
class ExecutionPolicy:
    """The execution policy of one run: every limit with where it came from.

    Durations are in seconds. Published as the ``run.limits`` event at the start of a run and
    shown by ``soulacy policy show``. ``extra`` holds the limits plugins declared, by name
    (read them with :meth:`limit`); ``extra_durations`` names those that are durations.
    """

    agent_id: str
    max_turns: Limit[int]
    max_tokens: Limit[int]
    max_llm_calls: Limit[int]
    max_output_tokens: Limit[int]
    reasoning_max_steps: Limit[int]
    no_progress_limit: Limit[int]
    run_timeout: Limit[float]
    llm_timeout: Limit[float]
    step_timeout: Limit[float]
    tool_timeout: Limit[float]
    reasoning_step_timeout: Limit[float]
    reasoning_total_timeout: Limit[float]
    context_window: Limit[int]
    extra: Mapping[str, Limit[Any]] = attrs.field(factory=dict, kw_only=True, hash=False)
    extra_durations: frozenset[str] = attrs.field(default=frozenset(), kw_only=True)
    # to_dict's formatting, done once: the policy is immutable and, cached by the policy plugin,
    # shared by every run of the same agent and overrides (each run publishes it as run.limits).
    _as_dict: dict[str, Any] | None = attrs.field(
        init=False, default=None, eq=False, hash=False, repr=False
    )

    def limit(self, name: str) -> Limit[Any]:
        """The limit called ``name``: a core limit or one a loaded plugin declared."""
        if name in CORE_LIMITS:
            found: Limit[Any] = getattr(self, name)
            return found
        try:
            return self.extra[name]
        except KeyError:
            known = ", ".join([*CORE_LIMITS, *self.extra])
            raise KeyError(
                f"no limit {name!r} in the execution policy of agent {self.agent_id!r}"
                f" (a plugin's limit exists only while that plugin is loaded; known: {known})"
            ) from None

    def limits(self) -> Mapping[str, Limit[Any]]:
        """Every limit by name: the core ones, then those plugins declared."""
        return {**{name: getattr(self, name) for name in CORE_LIMITS}, **self.extra}

    def is_duration(self, name: str) -> bool:
        return name in DURATION_FIELDS or name in self.extra_durations

    def with_limits(self, **changes: Limit[Any]) -> ExecutionPolicy:
        """A copy with some limits replaced, core or declared (what a wrapper of
        ``soulacy_resolve_policy`` returns). A name the policy does not have is a KeyError."""
        fields: dict[str, Any] = {n: v for n, v in changes.items() if n in CORE_LIMITS}
        declared = {n: v for n, v in changes.items() if n not in CORE_LIMITS}
        for name in declared:
            self.limit(name)  # raises, naming what is known
        if declared:
            fields["extra"] = {**self.extra, **declared}
        return attrs.evolve(self, **fields)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, every limit with its source (and a text form for durations). A fresh
        copy each call: callers may change it."""
        shown = self._as_dict
        if shown is None:
            shown = {"agent_id": self.agent_id}
            for name, limit in self.limits().items():
                shown[name] = limit.to_dict(duration=self.is_duration(name))
            object.__setattr__(self, "_as_dict", shown)
        return {k: dict(v) if isinstance(v, dict) else v for k, v in shown.items()}


# The names of the core limits, in the order the policy reports them.
CORE_LIMITS: tuple[str, ...] = tuple(
    a.name
    for a in attrs.fields(ExecutionPolicy)
    if a.init and a.name not in ("agent_id", "extra", "extra_durations")
)


def declared_limits(kernel: Kernel) -> dict[str, PolicyLimit]:
    """Every limit the loaded plugins declare (``soulacy_policy_limits``), by name, in the
    order the plugins load. A name declared twice, or the name of a core limit, is a
    PluginError naming the plugins."""
    found = kernel.pm.unique_contributions("soulacy_policy_limits", "policy limit")
    for name, (_, plugin) in found.items():
        if name in CORE_LIMITS:
            raise PluginError(
                f"plugin {plugin!r} declares the policy limit {name!r}, which is a core limit"
                " of the execution policy"
            )
    return {name: declared for name, (declared, _) in found.items()}
