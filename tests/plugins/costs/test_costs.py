"""Dollars per run from price metadata; dollar budgets and token quotas stay in force."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Usage
from soulacy.plugins import costs
from soulacy.plugins.costs import Meter, price_of
from soulacy.plugins.policy import Price
from soulacy.testing import Workspace

LOOP = [{"tool": "nope", "usage": {"input": 1000, "output": 1000}}]
PRICING = """costs:
  pricing:
    - {provider: scripted, model: "agents/*", input_per_mtok: 100, output_per_mtok: 100}
    - {input_per_mtok: 1, output_per_mtok: 1}
"""


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    return lambda **options: make_kernel(plugins=["no:sqlite_store"], **options)


def test_the_most_specific_price_wins() -> None:
    pricing = [
        Price(1, 1),
        Price(10, 20, provider="openai"),
        Price(2, 4, provider="openai", model="gpt-4o*"),
        Price(3, 6, provider="openai", model="gpt-4o-mini"),
    ]
    usage = Usage(1_000_000, 1_000_000)
    assert price_of(pricing, "openai", "gpt-4o-mini", usage) == 9.0
    assert price_of(pricing, "openai", "gpt-4o-2024", usage) == 6.0
    assert price_of(pricing, "openai", "o3", usage) == 30.0
    assert price_of(pricing, "local", "x", usage) == 2.0
    assert price_of([], "local", "x", usage) is None


async def test_the_run_metadata_carries_its_cost(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(PRICING)
    workspace.scripted_agent("a", [{"text": "hi", "usage": {"input": 5000, "output": 5000}}])
    result = await load().run("a", "go")
    assert result.metadata()["cost_usd"] == pytest.approx(1.0)  # 10,000 tokens at $100/M


async def test_an_unlimited_run_still_stops_at_its_dollar_budget(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        PRICING + "  max_run_cost_usd: 1\n"
        "runtime:\n  default_max_turns: 0\n  no_progress_limit: 0\n"
    )
    workspace.scripted_agent("a", LOOP, repeat=True, max_turns=-1)
    result = await load().run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_cost_usd")
    # $0.20 a call: the sixth call is refused before it is made (the turn it begins counts)
    assert (result.llm_calls, result.turns) == (5, 6)
    assert result.cost_usd == pytest.approx(1.0)


async def test_the_daily_budget_spans_runs(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(PRICING + "  max_daily_cost_usd: 0.5\n")
    workspace.scripted_agent(
        "a", [{"text": "hi", "usage": {"input": 1000, "output": 1000}}], repeat=True
    )
    kernel = load()
    statuses = [(await kernel.run("a", "go")).incomplete_reason for _ in range(4)]
    assert statuses == [None, None, None, "daily_cost_budget"]


async def test_a_token_quota_stops_an_unlimited_run(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "rate_limit:\n  tokens_per_minute: 5000\nruntime:\n  no_progress_limit: 0\n"
    )
    workspace.scripted_agent("a", LOOP, repeat=True, max_turns=-1, budget={"max_tokens": 0})
    result = await load().run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "token_quota_per_minute")
    assert result.input_tokens + result.output_tokens == 6000


async def test_a_quota_window_rolls(autojump_clock: Any) -> None:
    meter = Meter()
    meter.add(trio.current_time(), 100, 0.5)
    await trio.sleep(61)
    meter.add(trio.current_time(), 10, 0.1)
    assert meter.total(trio.current_time(), 60) == (10, pytest.approx(0.1))
    assert meter.total(trio.current_time(), 3600) == (110, pytest.approx(0.6))


async def test_the_daily_budget_is_counted_in_the_store_in_fixed_windows(
    workspace: Workspace, load: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.write_config(
        PRICING + "  max_daily_cost_usd: 0.5\nrate_limit:\n  tokens_per_minute: 5000\n"
    )
    workspace.scripted_agent(
        "a", [{"text": "hi", "usage": {"input": 1000, "output": 1000}}], repeat=True
    )
    kernel = load()
    store = kernel.store()
    when = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    monkeypatch.setattr(costs, "_now", lambda: when)
    assert (await kernel.run("a", "go")).status == "completed"
    assert await store.counter("cost:2027-01-15") == pytest.approx(0.2)  # settled to the call
    assert await store.counter(f"tokens:minute:{int(when // 60)}") == 2000
    assert await store.counter(f"tokens:minute:{int(when // 60) + 1}") == 0
    assert costs.counter_key("tokens_per_hour", when) == f"tokens:hour:{int(when // 3600)}"
    assert costs.counter_key("tokens_per_day", when) == "tokens:day:2027-01-15"
    # The day's budget is spent; the next UTC day starts from zero (a fixed window).
    await store.spend("cost:2027-01-15", 0.3)
    refused = await kernel.run("a", "go")
    assert (refused.status, refused.incomplete_reason) == ("incomplete", "daily_cost_budget")
    assert refused.llm_calls == 0  # refused before the call was made
    monkeypatch.setattr(costs, "_now", lambda: when + 86400)
    assert (await kernel.run("a", "go")).status == "completed"
    assert await store.counter("cost:2027-01-16") == pytest.approx(0.2)
    assert await store.counter("cost:2027-01-15") == pytest.approx(0.5)


async def test_a_call_that_ends_without_usage_gives_its_reservation_back(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        PRICING + "  max_daily_cost_usd: 5\nruntime:\n  timeouts: {tool: 50ms, llm: 50ms}\n"
    )
    workspace.scripted_agent("a", [{"text": "late", "sleep": 5}])
    kernel = load()
    result = await kernel.run("a", "a long question " * 100)  # estimated at 400 tokens
    assert result.incomplete_reason == "llm_timeout"
    key = costs.counter_key("max_daily_cost_usd", costs._now())
    assert await kernel.store().counter(key) == 0


def two_kernels_config(workspace: Workspace) -> None:
    workspace.write_config(
        "costs:\n  pricing:\n    - {input_per_mtok: 125, output_per_mtok: 125}\n"
        "  max_daily_cost_usd: 1\n"
    )
    # $0.25 a call (exact in binary), and long enough for calls of both to be in flight.
    step = {"text": "hi", "usage": {"input": 1000, "output": 1000}, "sleep": 0.05}
    workspace.scripted_agent("a", [step], repeat=True)


async def test_two_kernels_on_one_sqlite_file_share_the_daily_budget(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    two_kernels_config(workspace)
    first, second = make_kernel(), make_kernel()  # two owners of one soulacy.db
    try:
        spent = [await first.run("a", "go") for _ in range(4)]  # 0, .25, .5, .75: admitted
        assert [r.status for r in spent] == ["completed"] * 4
        refused = await second.run("a", "go")  # the other kernel sees what the first spent
        assert refused.incomplete_reason == "daily_cost_budget"
        key = costs.counter_key("max_daily_cost_usd", costs._now())
        assert await second.store().counter(key) == pytest.approx(1.0)
    finally:
        await first.aclose()
        await second.aclose()


async def test_calls_in_flight_count_so_two_kernels_cannot_both_spend_the_last_dollar(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    two_kernels_config(workspace)
    kernels = [make_kernel(), make_kernel()]
    key = costs.counter_key("max_daily_cost_usd", costs._now())
    try:
        for kernel in kernels:  # each knows what a call costs now: its estimate
            assert (await kernel.run("a", "go")).status == "completed"
        assert (await kernels[0].run("a", "go")).status == "completed"  # $0.75: one call left
        results: list[Any] = []

        async def spend(kernel: Kernel) -> None:
            results.append(await kernel.run("a", "go"))

        async with trio.open_nursery() as nursery:  # six calls at once, three per kernel
            for kernel in kernels:
                for _ in range(3):
                    nursery.start_soon(spend, kernel)
        total = await kernels[0].store().counter(key)
    finally:
        for kernel in kernels:
            await kernel.aclose()
    # The first call admitted reserved its estimate: the others found the budget spent (each
    # kernel counting alone, or without reservations, all six would have run: $2.25).
    reasons = sorted((r.incomplete_reason or "") for r in results)
    assert reasons == ["", *["daily_cost_budget"] * 5]
    assert total == pytest.approx(1.0)
    assert all(r.llm_calls == 0 for r in results if r.incomplete_reason)


SPENDER = """
import json, sys, trio
from soulacy.kernel import Kernel

async def main() -> None:
    kernel = Kernel.load(sys.argv[1], autoload=False, environ={})
    try:
        for _ in range(12):
            result = await kernel.run("a", "go")
            print(json.dumps([result.cost_usd, result.incomplete_reason]), flush=True)
            if result.incomplete_reason == "daily_cost_budget":
                break
    finally:
        await kernel.aclose()

trio.run(main)
"""


def test_two_processes_on_one_sqlite_file_never_overspend(workspace: Workspace) -> None:
    two_kernels_config(workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    command = [sys.executable, "-c", SPENDER, str(workspace.path)]
    procs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)  # started together: each loads, then spends until refused
    ]
    runs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        runs.extend(json.loads(line) for line in out.splitlines())
    cost = sum(c or 0.0 for c, _ in runs)
    assert cost <= 1.0 + 0.25 + 1e-9  # alone, each process would have spent $1
    assert [reason for _, reason in runs].count("daily_cost_budget") == 2

    async def counted() -> float:
        kernel = Kernel.load(workspace.path, autoload=False, environ={})
        try:
            return await kernel.store().counter(
                costs.counter_key("max_daily_cost_usd", costs._now())
            )
        finally:
            await kernel.aclose()

    assert trio.run(counted) == pytest.approx(cost)
