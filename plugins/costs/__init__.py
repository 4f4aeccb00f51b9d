"""The builtin costs plugin: dollars per run from price metadata, dollar budgets, token quotas.

Price metadata and dollar budgets live in ``costs:`` (config.yaml), token quotas in
``rate_limit:``::

    costs:
      pricing:
        - {provider: openai, model: "gpt-4o*", input_per_mtok: 2.5, output_per_mtok: 10}
        - {model: "*", input_per_mtok: 1, output_per_mtok: 3}     # a fallback
      max_run_cost_usd: 5        # a run stops as incomplete (max_cost_usd) past this
      max_daily_cost_usd: 50     # all runs of this process, per rolling 24 hours
    rate_limit:
      tokens_per_minute: 200000  # 0: none
      tokens_per_hour: 0
      tokens_per_day: 0

These stay in force when turns and tokens are unlimited: the engine asks before every model
call (``soulacy_check_budget``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

import attrs
import trio

from soulacy.kernel import ConfigSection, Kernel, hookimpl

__all__ = ["Meter", "RateLimitConfig", "price_of"]

WINDOWS = {"tokens_per_minute": 60.0, "tokens_per_hour": 3600.0, "tokens_per_day": 86400.0}


@attrs.frozen
class RateLimitConfig:
    tokens_per_minute: int = 0
    tokens_per_hour: int = 0
    tokens_per_day: int = 0


def price_of(pricing: Sequence[Any], provider: str, model: str | None, usage: Any) -> float | None:
    """Dollars of one call by the most specific matching price (exact beats wildcard)."""
    matches = [
        p
        for p in pricing
        if fnmatchcase(provider, p.provider) and fnmatchcase(model or "", p.model)
    ]
    if not matches:
        return None
    best = max(matches, key=lambda p: (_exactness(p.provider), _exactness(p.model)))
    return (
        float(usage.input_tokens * best.input_per_mtok + usage.output_tokens * best.output_per_mtok)
        / 1_000_000
    )


def _exactness(pattern: str) -> tuple[bool, int]:
    wild = any(c in pattern for c in "*?[")
    return (not wild, len(pattern.replace("*", "")))


class Meter:
    """Tokens and dollars of one process in per-minute buckets (a day of them at most)."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[float]] = {}  # minute -> [tokens, dollars]

    def add(self, now: float, tokens: int, dollars: float) -> None:
        bucket = self._buckets.setdefault(int(now // 60), [0.0, 0.0])
        bucket[0] += tokens
        bucket[1] += dollars
        oldest = int(now // 60) - 24 * 60
        for minute in [m for m in self._buckets if m < oldest]:
            del self._buckets[minute]

    def total(self, now: float, seconds: float) -> tuple[float, float]:
        start = int((now - seconds) // 60) + 1
        tokens = dollars = 0.0
        for minute, (t, d) in self._buckets.items():
            if minute >= start:
                tokens += t
                dollars += d
        return tokens, dollars


_meters: weakref.WeakKeyDictionary[Kernel, Meter] = weakref.WeakKeyDictionary()


def _meter(kernel: Kernel) -> Meter:
    return _meters.setdefault(kernel, Meter())


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("rate_limit", RateLimitConfig, doc="token quotas")]


@hookimpl
def soulacy_price(kernel: Kernel, provider: str, model: str | None, usage: Any) -> float | None:
    return price_of(kernel.config.section("costs").pricing, provider, model, usage)


@hookimpl
def soulacy_usage(kernel: Kernel, run: Any, provider: str, model: str | None, usage: Any) -> None:
    dollars = soulacy_price(kernel, provider, model, usage) or 0.0
    _meter(kernel).add(trio.current_time(), usage.input_tokens + usage.output_tokens, dollars)


@hookimpl
def soulacy_check_budget(kernel: Kernel, run: Any) -> str | None:
    costs = kernel.config.section("costs")  # owned by the policy plugin; read on every turn
    spent = run.result.cost_usd or 0.0
    if costs.max_run_cost_usd and spent >= costs.max_run_cost_usd:
        return "max_cost_usd"
    meter, now = _meter(kernel), trio.current_time()
    daily = costs.max_daily_cost_usd
    if daily and meter.total(now, 86400.0)[1] >= daily:
        return "daily_cost_budget"
    quotas: RateLimitConfig = kernel.config.section("rate_limit")
    for key, seconds in WINDOWS.items():
        quota = getattr(quotas, key)
        if quota and meter.total(now, seconds)[0] >= quota:
            return f"token_quota_{key.removeprefix('tokens_')}"  # e.g. token_quota_per_minute
    return None
