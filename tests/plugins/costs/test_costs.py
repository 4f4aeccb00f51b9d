"""Dollars per run from price metadata; dollar budgets and token quotas stay in force."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Usage
from soulacy.kernel.testing import Workspace
from soulacy.plugins.costs import Meter, price_of
from soulacy.plugins.policy import Price

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
    assert result.turns == 5  # $0.20 a call: the sixth would start past the dollar budget
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
