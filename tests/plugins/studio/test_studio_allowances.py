"""Build allowances (``llm.studio.*``): attempts, tokens, spend and elapsed time end a build as
incomplete with the allowance named; -1 attempts is unlimited, 0 selects the default."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import attrs
import pytest
import trio
from studio_support import FakeBuilder, Studio, fenced, soul

from soulacy.kernel import Kernel, hookimpl
from soulacy.kernel.messages import ModelRequest, Usage
from soulacy.kernel.policy import ExecutionPolicy, Limit, declared_limits
from soulacy.kernel.providers import ProviderError
from soulacy.plugins.studio import POLICY_LIMITS, Allowances, build
from soulacy.testing import Workspace, throwaway_plugin

SPEC: dict[str, Any] = {"id": "reporter", "goal": "Write a daily report"}
INVALID = fenced("id: reporter\nbogus: true\n")


def studio_config(**values: Any) -> dict[str, Any]:
    return {"llm": {"studio": values}}


async def test_max_build_attempts_stops_the_build_as_incomplete(studio: Studio) -> None:
    builder = FakeBuilder([INVALID])
    kernel = studio.kernel(builder, studio_config(max_build_attempts=3))
    result = await build(kernel, SPEC)

    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_attempts",
        3,
    )
    assert len(builder.requests) == 3
    assert result.errors == ["SOUL.yaml:2:1: bogus: unknown key (got True)"]
    assert result.candidate == "id: reporter\nbogus: true\n"  # for the person to look at
    assert result.path is None
    assert not (studio.workspace.path / "agents" / "reporter" / "SOUL.yaml").exists()
    attempts = result.limits["max_build_attempts"]
    assert (attempts["value"], attempts["source"]) == (3, "config.yaml")


async def test_max_build_tokens(studio: Studio) -> None:
    builder = FakeBuilder([INVALID], usage=Usage(100, 20))
    kernel = studio.kernel(builder, studio_config(max_build_tokens=250))
    result = await build(kernel, SPEC)

    # 120 and 240 tokens leave room for another call; 360 do not
    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_tokens",
        3,
    )
    assert (result.input_tokens, result.output_tokens, result.tokens) == (300, 60, 360)


async def test_the_token_allowance_is_checked_before_each_check_run(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    builder = FakeBuilder([fenced(soul())], usage=Usage(100, 20))
    kernel = studio.kernel(builder, studio_config(max_build_tokens=100))
    spec = {**SPEC, "checks": [{"input": "go", "expect": [{"value": "report"}]}]}
    result = await build(kernel, spec)

    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_tokens",
        1,
    )
    assert result.checks == []
    assert result.errors == []
    assert not (studio.workspace.path / "agents" / "reporter" / "SOUL.yaml").exists()


def price_plugin(dollars: float) -> Any:
    def soulacy_price(kernel: Kernel, provider: str, model: str | None, usage: Any) -> float:
        return dollars

    return throwaway_plugin("price", soulacy_price=soulacy_price)


async def test_max_build_cost_usd(studio: Studio) -> None:
    builder = FakeBuilder([INVALID])
    config = studio_config(max_build_cost_usd=0.025)
    result = await build(studio.kernel(builder, config, [price_plugin(0.01)]), SPEC)

    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_cost_usd",
        3,
    )
    assert result.cost_usd == pytest.approx(0.03)
    assert result.warnings == []


async def test_an_unpriced_model_is_said_when_spend_is_limited(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    kernel = studio.kernel(FakeBuilder([fenced(soul())]), studio_config(max_build_cost_usd=1))
    result = await build(kernel, SPEC)
    assert result.status == "completed"
    assert result.cost_usd is None
    assert [w.split(" (")[0] for w in result.warnings] == [
        "max_build_cost_usd is set but some model calls had no known price"
    ]


async def test_max_build_elapsed(studio: Studio, autojump_clock: trio.testing.MockClock) -> None:
    builder = FakeBuilder([INVALID], sleep=25)  # each answer takes 25 seconds
    kernel = studio.kernel(builder, studio_config(max_build_elapsed="1m"))
    result = await build(kernel, SPEC)

    # answers at 25s and 50s; the third call is cut off at one minute
    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_elapsed",
        3,
    )
    assert result.errors == ["SOUL.yaml:2:1: bogus: unknown key (got True)"]  # attempt 2's


async def test_a_model_call_longer_than_the_llm_timeout_is_a_failed_attempt(
    studio: Studio, autojump_clock: trio.testing.MockClock
) -> None:
    studio.script("good.yaml", "report")
    builder = FakeBuilder([fenced(soul())], sleep=400)
    config = {**studio_config(max_build_attempts=2), "runtime": {"timeouts": {"llm": "5m"}}}
    result = await build(studio.kernel(builder, config), SPEC)
    assert (result.status, result.reason, result.attempts) == (
        "incomplete",
        "max_build_attempts",
        2,
    )
    assert result.errors == ["the model did not answer within 5m"]


async def test_unlimited_attempts_go_on_until_the_agent_passes(studio: Studio) -> None:
    studio.script("good.yaml", "report")

    def reply(request: ModelRequest, index: int) -> str:
        return INVALID if index < 40 else fenced(soul())

    builder = FakeBuilder([reply])
    result = await build(studio.kernel(builder, studio_config(max_build_attempts=-1)), SPEC)

    assert (result.status, result.attempts) == ("completed", 41)
    assert result.limits["max_build_attempts"]["value"] == "unlimited"


async def test_zero_attempts_selects_the_default(studio: Studio) -> None:
    builder = FakeBuilder([INVALID], usage=Usage(0, 0))
    result = await build(studio.kernel(builder, studio_config(max_build_attempts=0)), SPEC)

    assert (result.reason, result.attempts) == ("max_build_attempts", 32)
    assert result.limits["max_build_attempts"] == {
        "value": 32,
        "unlimited": False,
        "source": "config.yaml",
        "location": result.limits["max_build_attempts"]["location"],
        "reason": "0 selects the default",
    }


async def test_the_defaults_and_zero_meaning_none(studio: Studio) -> None:
    studio.script("good.yaml", "report")
    kernel = studio.kernel(FakeBuilder([fenced(soul())]), studio_config(max_build_elapsed="0"))
    limits = (await build(kernel, SPEC)).limits
    assert {
        name: (v["value"], v["source"]) for name, v in limits.items() if name != "resolved_by"
    } == {
        "max_build_tokens": ("unlimited", "default"),
        "max_build_cost_usd": ("unlimited", "default"),
        "max_build_attempts": (32, "default"),
        "max_build_elapsed": ("unlimited", "config.yaml"),
    }


async def test_an_agent_that_loads_resolves_its_allowances_through_the_policy_hook(
    studio: Studio,
) -> None:
    """A stricter deployment policy wraps ``soulacy_resolve_policy``; builds obey it."""

    @hookimpl(wrapper=True)
    def soulacy_resolve_policy(
        kernel: Kernel, agent_id: str, overrides: Any
    ) -> Generator[None, ExecutionPolicy, ExecutionPolicy]:
        policy = yield
        return policy.with_limits(max_build_attempts=Limit(2, "company policy"))

    studio.script("good.yaml", "report")
    studio.workspace.write_agent("reporter", soul())
    strict = throwaway_plugin("strict", soulacy_resolve_policy=soulacy_resolve_policy)
    kernel = studio.kernel(FakeBuilder([INVALID]), plugins=[strict])
    result = await build(kernel, SPEC)

    assert (result.reason, result.attempts) == ("max_build_attempts", 2)
    assert result.limits["max_build_attempts"]["source"] == "company policy"
    assert result.limits["resolved_by"] == "policy hook"
    # resolving did not leave the file in the caller's kernel cache: an edit is seen
    studio.workspace.write_agent("reporter", soul().replace("name: Reporter", "name: Renamed"))
    assert kernel.agent("reporter").section("name") == "Renamed"


async def test_a_provider_error_fails_the_build(studio: Studio) -> None:
    def reply(request: ModelRequest, index: int) -> str:
        raise ProviderError("HTTP 401: invalid API key", status=401)

    result = await build(studio.kernel(FakeBuilder([reply])), SPEC)
    assert (result.status, result.reason, result.attempts) == ("failed", "provider_error", 1)
    assert result.errors == ["HTTP 401: invalid API key"]


def test_studio_declares_its_allowances_as_limits_of_the_policy(kernel: Kernel) -> None:
    declared = declared_limits(kernel)
    assert tuple(declared[limit.name] for limit in POLICY_LIMITS) == POLICY_LIMITS
    assert [limit.path for limit in POLICY_LIMITS] == [
        f"llm.studio.{limit.name}" for limit in POLICY_LIMITS
    ]
    assert kernel.config.get("llm.studio.max_build_attempts") == 32  # studio's own section


async def test_a_policy_that_does_not_hold_the_allowances_leaves_the_workspace_values(
    studio: Studio,
) -> None:
    """A replacement policy need not know Studio: what it does not hold is read from config."""

    @hookimpl(wrapper=True)
    def soulacy_resolve_policy(
        kernel: Kernel, agent_id: str, overrides: Any
    ) -> Generator[None, ExecutionPolicy, ExecutionPolicy]:
        policy = yield
        return attrs.evolve(policy, extra={})

    studio.script("good.yaml", "report")
    studio.workspace.write_agent("reporter", soul())
    forgetful = throwaway_plugin("forgetful", soulacy_resolve_policy=soulacy_resolve_policy)
    config = studio_config(max_build_attempts=2)
    result = await build(studio.kernel(FakeBuilder([INVALID]), config, [forgetful]), SPEC)

    assert (result.reason, result.attempts) == ("max_build_attempts", 2)
    assert result.limits["max_build_attempts"]["source"] == "config.yaml"
    assert result.limits["resolved_by"] == "policy hook"


def test_without_the_policy_plugin_the_declared_defaults_apply(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Nothing reads the workspace's limits then (the policy plugin defines the reader)."""
    workspace.write_config("llm:\n  studio:\n    max_build_attempts: 5\n")
    kernel = make_kernel(plugins=["no:policy", "no:reasoning", "no:costs"])
    shown = Allowances.from_config(kernel).to_dict()
    assert {
        name: (v["value"], v["source"]) for name, v in shown.items() if name != "resolved_by"
    } == {
        "max_build_tokens": ("unlimited", "default"),
        "max_build_cost_usd": ("unlimited", "default"),
        "max_build_attempts": (32, "default"),
        "max_build_elapsed": (48 * 3600.0, "default"),
    }
