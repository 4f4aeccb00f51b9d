"""Today's spend against the configured budgets (the portal shows it in its chat header and Runs).

``GET /costs/today`` answers, for every principal:

- ``daily_budget``: the workspace's daily dollar budget (``costs.max_daily_cost_usd``; None
  when not set) and what every principal's runs spent of it today (the ``costs`` plugin's
  store counter ``cost:<UTC date>``, shared by every process on the store; it counts the
  calls in flight at their estimate). It is everyone's: a run past it stops for every
  principal (``daily_cost_budget``), so each may see how far it is. Without a budget the
  counter is not kept (the ``costs`` plugin writes only the counters of limits that are set):
  ``spent_usd`` is then None.
- ``token_quotas``: each ``rate_limit`` quota that is set, with its window's counter.
- ``yours``: the cost and tokens of the principal's own runs started today (UTC), from their
  records (its newest :data:`SCAN` runs).

The day is the UTC day, as the ``costs`` plugin's windows (fixed, not rolling): ``resets_at``
is the next UTC midnight.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

from soulacy.kernel import Kernel
from soulacy.plugins.http import HttpRequest, HttpResponse

from . import counter_key

SCAN = 500  # the principal's newest runs summed for "yours"
QUOTAS = ("tokens_per_minute", "tokens_per_hour", "tokens_per_day")


def _day_start(now: float) -> float:
    return float(calendar.timegm((*time.gmtime(now)[:3], 0, 0, 0)))


async def today(kernel: Kernel, principal: str | None, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    store = kernel.store()
    costs = kernel.config.section("costs")
    budget = float(costs.max_daily_cost_usd) if costs.max_daily_cost_usd else None
    spent = await store.counter(counter_key("max_daily_cost_usd", now)) if budget else None
    quotas = {}
    limits = kernel.config.section("rate_limit")
    for name in QUOTAS:
        limit = int(getattr(limits, name, 0) or 0)
        if limit:
            used = await store.counter(counter_key(name, now))
            quotas[name] = {"limit": limit, "used": int(used)}
    start = _day_start(now)
    cost, tokens, runs, unpriced = 0.0, 0, 0, 0
    for record in await store.list_runs(SCAN, principal=principal):
        if record.started_at < start:
            break  # newest first: the rest are older
        meta = record.metadata or {}
        runs += 1
        price = meta.get("cost_usd")
        if isinstance(price, int | float):
            cost += float(price)
        elif record.status != "running":
            unpriced += 1
        total = (meta.get("tokens") or {}).get("total")
        if isinstance(total, int):
            tokens += total
    return {
        "day": time.strftime("%Y-%m-%d", time.gmtime(now)),
        "resets_at": start + 86400,
        "daily_budget": {
            "limit_usd": budget,
            "spent_usd": None if spent is None else round(float(spent), 6),
            "source": "costs.max_daily_cost_usd",
        },
        "token_quotas": quotas,
        "yours": {
            "principal": principal,
            "runs": runs,
            "cost_usd": round(cost, 6),
            "tokens": tokens,
            "runs_without_price": unpriced,
        },
    }


async def answer(kernel: Kernel, request: HttpRequest) -> HttpResponse:
    return HttpResponse.json(
        await today(kernel, request.principal), headers={"cache-control": "no-store"}
    )
