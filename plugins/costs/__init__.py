"""The builtin costs plugin: dollars per run from price metadata, dollar budgets, token quotas.

Price metadata and dollar budgets live in ``costs:`` (config.yaml), token quotas in
``rate_limit:``::

    costs:
      pricing:
        - {provider: openai, model: "gpt-4o*", input_per_mtok: 2.5, output_per_mtok: 10}
        - {model: "*", input_per_mtok: 1, output_per_mtok: 3}     # a fallback
      max_run_cost_usd: 5        # a run stops as incomplete (max_cost_usd) past this
      max_daily_cost_usd: 50     # all runs of every process sharing the store, per UTC day
    rate_limit:
      tokens_per_minute: 200000  # 0: none
      tokens_per_hour: 0
      tokens_per_day: 0

``GET /api/v1/costs/today`` (``_today.py``) tells any principal today's spend against these
(the portal shows it). These stay in force when turns and tokens are unlimited: the engine asks
before every model call (``soulacy_check_budget``).

**Shared budgets.** The daily dollar budget and the token quotas are counters of the store
(``Store.spend``), so every process sharing the store (one SQLite file) spends from the same
budget. Their windows are **fixed**, by the UTC wall clock, not rolling: a window's counter
starts from zero at its boundary. The key of a counter carries its window (:func:`counter_key`):
``cost:<UTC date>`` for the daily budget, ``tokens:minute:<epoch minute>``,
``tokens:hour:<epoch hour>`` and ``tokens:day:<UTC date>`` for the quotas. Only the counters
of the limits that are set are written.

**Admission, atomic across processes.** Each model call reserves an estimate of itself on
every counter with a limit, in one conditional add per counter, right before it is made
(``soulacy_admit_model_call``, which the engine awaits: ``soulacy_check_budget`` is synchronous
and cannot reach the store). The call is admitted while the counter, that is what every process
spent plus the reservations of the calls in flight, is below the limit: as before, the last
admitted call may take the total past the limit. A refused call is not made: the run stops as
incomplete with the reason it always had (``daily_cost_budget``, ``token_quota_per_minute``,
``token_quota_per_hour``, ``token_quota_per_day``). After the call (``llm.result``) the
reservation is settled to the call's actual usage; a call that ended without usage (a provider
error, a timeout, a cancellation) gives its reservation back. Two processes therefore cannot
both start a call on the last dollar: the first one's reservation counts for the second. (A
run stopped by a shared budget is stopped at its model call, after its turn boundary: its
``turns`` counts that turn, its ``llm_calls`` do not count the refused call.)

The estimate of a call is the larger of the run's previous call (for a run's first call, this
process's last call of the same agent) and the run's messages at four characters a token,
priced by ``soulacy_price``. A run's model calls are made one after the other.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import ConfigSection, StashKey, hookimpl
from soulacy.kernel.contracts import RunParticipant
from soulacy.kernel.messages import Usage

if TYPE_CHECKING:  # the runtime (trio, the kernel) loads with the first reservation
    from soulacy.kernel import Event, Kernel
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import ModelReply, ModelRequest

__all__ = ["Meter", "RateLimitConfig", "counter_key", "price_of"]

log = logging.getLogger("soulacy.costs")

WINDOWS = {"tokens_per_minute": 60.0, "tokens_per_hour": 3600.0, "tokens_per_day": 86400.0}
CHARS_PER_TOKEN = 4.0  # the estimate of a call's input from its messages
TOKENS, DOLLARS = 0, 1  # the units of a counter, indexes of an (tokens, dollars) amount

_now = time.time  # the wall clock of the windows (shared by every process); tests replace it


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


def counter_key(limit: str, now: float) -> str:
    """The store counter of ``limit`` (``max_daily_cost_usd`` or a ``rate_limit`` key) in the
    fixed window that contains the UTC wall-clock time ``now``."""
    day = time.strftime("%Y-%m-%d", time.gmtime(now))
    if limit == "max_daily_cost_usd":
        return f"cost:{day}"
    if limit == "tokens_per_minute":
        return f"tokens:minute:{int(now // 60)}"
    if limit == "tokens_per_hour":
        return f"tokens:hour:{int(now // 3600)}"
    if limit == "tokens_per_day":
        return f"tokens:day:{day}"
    raise ValueError(f"no counter for {limit!r}")


class Meter:
    """Tokens and dollars of one process in per-minute buckets (a day of them at most).

    A local view of this process's own usage; the budgets are enforced with the store's
    shared counters instead."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[float]] = {}  # minute -> [tokens, dollars]

    def add(self, now: float, tokens: int, dollars: float) -> None:
        minute = int(now // 60)
        bucket = self._buckets.get(minute)
        if bucket is None:  # a new minute: the day's oldest go (once a minute, not every call)
            bucket = self._buckets[minute] = [0.0, 0.0]
            for old in [m for m in self._buckets if m < minute - 24 * 60]:
                del self._buckets[old]
        bucket[0] += tokens
        bucket[1] += dollars

    def total(self, now: float, seconds: float) -> tuple[float, float]:
        start = int((now - seconds) // 60) + 1
        tokens = dollars = 0.0
        for minute, (t, d) in self._buckets.items():
            if minute >= start:
                tokens += t
                dollars += d
        return tokens, dollars


Amount = tuple[float, float]  # (tokens, dollars)


@attrs.define(eq=False)  # calls are told apart by identity
class _Call:
    """A model call admitted: what it reserved on which counter, and its usage once known."""

    reserved: list[tuple[str, int, float]] = attrs.Factory(list)  # (key, unit, amount)
    actual: Amount | None = None


@attrs.define
class _RunBudget:
    estimate: Amount = (0.0, 0.0)  # of the run's next call, made at its turn boundary
    last: Amount | None = None  # the run's last call
    calls: list[_Call] = attrs.Factory(list)  # admitted, not settled yet


class _Ledger:
    """One kernel's reservations on the shared counters, by run id."""

    def __init__(self) -> None:
        self.runs: dict[str, _RunBudget] = {}
        self.last_by_agent: dict[str, Amount] = {}
        self.observing = False  # of the events that settle reservations: since the first one
        # Whether the configuration sets a shared limit, with the configuration it was read
        # from: kept here, so that a turn's three questions cost one stash lookup each.
        self.limits_of: tuple[object, bool] | None = None


_LEDGER = StashKey[_Ledger]("costs ledger")


def _ledger(kernel: Kernel) -> _Ledger:
    ledger = kernel.stash.get(_LEDGER, None)
    if ledger is None:
        ledger = kernel.stash[_LEDGER] = _Ledger()
    return ledger


def _budget(kernel: Kernel, ledger: _Ledger, run_id: str) -> _RunBudget:
    """The run's reservations, made on first use. Only then does the plugin read events (the
    ones that settle them): a kernel with no shared limit builds none for it."""
    if not ledger.observing:
        ledger.observing = True
        kernel.events.observe(
            lambda event: _observe(kernel, event),
            ("llm.result", *ENDINGS),
        )
    return ledger.runs.setdefault(run_id, _RunBudget())


def _has_limits(kernel: Kernel, ledger: _Ledger) -> bool:
    """Whether any shared limit is set (what :func:`_limits` lists, without making keys):
    asked three times a turn, answered again only when the configuration is replaced."""
    config = kernel.config
    known = ledger.limits_of
    if known is not None and known[0] is config:
        return known[1]
    quotas: RateLimitConfig = config.section("rate_limit")
    found = bool(
        config.section("costs").max_daily_cost_usd
        or quotas.tokens_per_minute
        or quotas.tokens_per_hour
        or quotas.tokens_per_day
    )
    ledger.limits_of = (config, found)
    return found


def _limits(kernel: Kernel, now: float) -> list[tuple[str, str, int, float]]:
    """(counter key, reason, unit, limit) of each shared limit that is set, in the order
    their reasons are given."""
    costs = kernel.config.section("costs")  # owned by the policy plugin
    found = []
    if costs.max_daily_cost_usd:
        key = counter_key("max_daily_cost_usd", now)
        found.append((key, "daily_cost_budget", DOLLARS, float(costs.max_daily_cost_usd)))
    quotas: RateLimitConfig = kernel.config.section("rate_limit")
    for name in WINDOWS:
        quota = getattr(quotas, name)
        if quota:
            reason = f"token_quota_{name.removeprefix('tokens_')}"  # token_quota_per_minute
            found.append((counter_key(name, now), reason, TOKENS, float(quota)))
    return found


def _slack(limit: float) -> float:
    """How far below ``limit`` a counter still admits a call: "below the limit", in floats."""
    return 1e-9 * max(1.0, abs(limit))


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("rate_limit", RateLimitConfig, doc="token quotas")]


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[Any]:
    """``GET /costs/today``: today's spend against the budgets, for every principal."""
    from soulacy.plugins.http import HttpRoute

    from ._today import answer

    return [HttpRoute("GET", "/costs/today", lambda request: answer(kernel, request))]


@hookimpl
def soulacy_price(kernel: Kernel, provider: str, model: str | None, usage: Any) -> float | None:
    pricing = kernel.config.section("costs").pricing
    return price_of(pricing, provider, model, usage) if pricing else None


@hookimpl
def soulacy_run_participants(kernel: Kernel, run: Run) -> list[RunParticipant] | None:
    # Decided once per run: with no price, no run budget and no shared limit, a run's model
    # calls cost nothing to account (a price hook of another plugin counts as a price).
    costs = kernel.config.section("costs")  # owned by the policy plugin
    priced = bool(costs.pricing) or len(kernel.hook.soulacy_price.get_hookimpls()) > 1
    if not (priced or costs.max_run_cost_usd or _has_limits(kernel, _ledger(kernel))):
        return None
    return [_Accounts(kernel, priced, costs.max_run_cost_usd)]


class _Accounts(RunParticipant):
    """One run's costs: its price per call, its budget and the shared limits' reservations
    (a participant: before and after each model call)."""

    def __init__(self, kernel: Kernel, priced: bool, max_run_cost: float | None) -> None:
        self.kernel = kernel
        self.priced = priced
        self.max_run_cost = max_run_cost

    def before_model_call(
        self, run: Run, request: ModelRequest
    ) -> Awaitable[str | None] | str | None:
        spent = run.result.cost_usd or 0.0
        if self.max_run_cost and spent >= self.max_run_cost:
            return "max_cost_usd"
        # The shared budgets are reserved at the call itself, in the store; the call is
        # estimated first. Nothing to reserve or settle (no shared budget, no call of this run
        # admitted): answered without a coroutine, as most runs' calls are.
        kernel = self.kernel
        ledger = _ledger(kernel)
        limited = _has_limits(kernel, ledger)
        if limited:
            budget = _budget(kernel, ledger, run.run_id)
            budget.estimate = _estimate(kernel, run, ledger, budget)
        if run.run_id not in ledger.runs and not limited:
            return None
        return _reserve(kernel, run.run_id)

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        kernel, usage = self.kernel, reply.usage
        price = None
        if self.priced:
            price = kernel.hook.soulacy_price(
                kernel=kernel, provider=provider, model=model, usage=usage
            )
            if price is not None:
                run.result.cost_usd = (run.result.cost_usd or 0.0) + float(price)
        # What a call used feeds the estimates of the shared limits' reservations: with none
        # set, and nothing reserved by this run, there is nothing to keep.
        ledger = _ledger(kernel)
        if run.run_id not in ledger.runs and not _has_limits(kernel, ledger):
            return
        tokens = usage.input_tokens + usage.output_tokens
        actual = (float(tokens), float(price or 0.0))
        ledger.last_by_agent[run.agent_id] = actual
        budget = ledger.runs.get(run.run_id)
        if budget is not None:
            budget.last = actual
            if budget.calls and budget.calls[-1].actual is None:
                budget.calls[-1].actual = actual  # settled at llm.result, which follows at once


def _estimate(kernel: Kernel, run: Run, ledger: _Ledger, budget: _RunBudget) -> Amount:
    known = budget.last or ledger.last_by_agent.get(run.agent_id) or (0.0, 0.0)
    chars = sum(
        len(m.content) + sum(len(json.dumps(c.arguments, default=str)) for c in m.tool_calls)
        for m in run.messages
    )
    tokens = chars / CHARS_PER_TOKEN
    if tokens <= known[TOKENS]:
        return known
    dollars = 0.0
    try:
        provider, model = kernel.providers.model_of(run.agent)
        price = kernel.hook.soulacy_price(
            kernel=kernel, provider=provider, model=model, usage=Usage(int(tokens), 0)
        )
        dollars = float(price or 0.0)
    except Exception as exc:  # an estimate only: the call itself says what is wrong
        log.debug("estimating the cost of a call of run %r failed: %s", run.run_id, exc)
    return (tokens, max(known[DOLLARS], dollars))


def _observe(kernel: Kernel, event: Event) -> Awaitable[None] | None:
    if event.run_id is None or event.type not in ("llm.result", *ENDINGS):
        return None
    if event.run_id not in _ledger(kernel).runs:
        return None  # nothing was reserved for this run: nothing to settle
    return _settle(kernel, event.run_id, ended=event.type in ENDINGS)


# A suspended run ends here too (its decision resumes it as a new attempt, reserved anew).
ENDINGS = ("run.completed", "run.suspended")


async def _reserve(kernel: Kernel, run_id: str) -> str | None:
    """Admit the model call about to be made (None), or say why not: the engine stops the run
    before the call."""
    ledger = _ledger(kernel)
    if run_id in ledger.runs:
        await _settle(kernel, run_id, ended=False, unfinished=True)  # a call that ended unused
    limits = _limits(kernel, _now())
    if not limits:
        return None
    budget = _budget(kernel, ledger, run_id)  # estimated at its turn, if any
    store = kernel.store()
    call = _Call()
    refused: str | None = None
    import trio

    with trio.CancelScope(shield=True):  # a reservation made is always known, to be settled
        budget.calls.append(call)
        for key, reason, unit, limit in limits:
            amount = budget.estimate[unit]
            # Admitted while the counter is below the limit: the add may take it past.
            if await store.spend(key, amount, limit + amount - _slack(limit)) is None:
                refused = reason
                break
            call.reserved.append((key, unit, amount))
        if refused is not None:
            await _settle(kernel, run_id, ended=False, unfinished=True)  # give back the others
    return refused


async def _settle(kernel: Kernel, run_id: str, *, ended: bool, unfinished: bool = False) -> None:
    """Settle the run's admitted calls to their usage: those whose usage is known, and with
    ``unfinished`` or ``ended`` also those that ended without usage (their reservation is
    given back). ``ended``: the run is over, its bookkeeping goes."""
    ledger = _ledger(kernel)
    budget = ledger.runs.pop(run_id, None) if ended else ledger.runs.get(run_id)
    if budget is None:
        return
    settle = [c for c in budget.calls if c.actual is not None or ended or unfinished]
    if not settle:
        return
    budget.calls = [c for c in budget.calls if c not in settle]
    store = kernel.store()
    import trio

    from soulacy.kernel.store import StorageError

    with trio.CancelScope(shield=True):
        for call in settle:
            for key, unit, reserved in call.reserved:
                delta = (call.actual[unit] if call.actual is not None else 0.0) - reserved
                if not delta:
                    continue
                try:
                    await store.spend(key, delta)  # never refused: no limit
                except StorageError as exc:  # the counter keeps the estimate instead
                    log.warning("settling the budget counter %r failed: %s", key, exc)
