"""Rules of the execution policy that a type alone cannot say."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from soulacy.kernel import ConfigIssue, Location, Settings
from soulacy.kernel.policy import PolicyLimit

UNLIMITED = float("inf")
# runtime.timeouts.http is the HTTP plugin's to check (it must outlast the run): see its plugin.
TIMEOUT_ORDER = ("tool", "llm", "step", "run")

# (dotted key, smallest allowed value, what the allowed values mean)
WORKSPACE_RANGES = (
    ("runtime.default_max_turns", 0, "0 means unlimited"),
    ("runtime.max_turns_ceiling", 0, "0 means no ceiling"),
    ("runtime.default_budget.max_tokens", 0, "0 means unlimited"),
    ("runtime.default_budget.max_llm_calls", 0, "0 means unlimited"),
    ("runtime.max_budget.max_tokens", 0, "0 means no ceiling"),
    ("runtime.max_budget.max_llm_calls", 0, "0 means no ceiling"),
    ("runtime.no_progress_limit", 0, "0 disables stall detection"),
    ("costs.default_max_output_tokens", 0, "0 leaves it to the model's capacity"),
    ("costs.max_output_tokens_ceiling", 0, "0 means no ceiling"),
    ("costs.max_run_cost_usd", 0, "0 means no dollar budget per run"),
    ("costs.max_daily_cost_usd", 0, "0 means no daily dollar budget"),
)
AGENT_RANGES = (
    ("max_turns", -1, "0 or omitted inherits, -1 requests unlimited"),
    ("budget.max_tokens", 0, "0 requests unlimited"),
    ("budget.max_llm_calls", 0, "0 requests unlimited"),
    ("no_progress_limit", 0, "0 disables stall detection"),
    ("reasoning.max_steps", -1, "omitted inherits, -1 is unlimited"),
    ("llm.max_tokens", 0, "0 or omitted inherits the workspace allowance"),
)


def _issue(settings: Settings, path: str, message: str, value: Any) -> ConfigIssue:
    loc = settings.source_of(path) or Location(str(settings.file))
    return ConfigIssue(loc, path, message, value, True)


def _value(settings: Settings, path: str) -> Any:
    try:
        return settings.get(path)
    except (KeyError, AttributeError):
        return None


def check_ranges(
    settings: Settings, ranges: Iterable[tuple[str, Any, str]]
) -> Iterator[ConfigIssue]:
    for path, smallest, meaning in ranges:
        value = _value(settings, path)
        if value is not None and value < smallest:
            said = f" ({meaning})" if meaning else ""
            yield _issue(settings, path, f"expected {smallest} or more{said}", value)


def declared_ranges(declared: Iterable[PolicyLimit]) -> tuple[tuple[str, Any, str], ...]:
    """The ranges of the limits plugins declared, checked like the policy's own."""
    return tuple((d.path, d.minimum, d.meaning) for d in declared if d.minimum is not None)


def check_timeout_order(settings: Settings) -> Iterator[ConfigIssue]:
    """tool <= llm <= step <= run, where "0" (no deadline) counts as infinity."""

    def seconds(name: str) -> float:
        value = settings.get(f"runtime.timeouts.{name}").seconds
        return UNLIMITED if value == 0 else float(value)

    for shorter, longer in itertools.pairwise(TIMEOUT_ORDER):
        if seconds(shorter) <= seconds(longer):
            continue
        path = f"runtime.timeouts.{longer}"
        inner = settings.get(f"runtime.timeouts.{shorter}")
        shown = "no deadline" if inner.seconds == 0 else str(inner)
        message = (
            f"must be at least runtime.timeouts.{shorter} ({shown}): timeouts grow"
            " tool <= llm <= step <= run, with 0 meaning no deadline"
        )
        yield _issue(settings, path, message, str(settings.get(path)))
