"""Resolved policies are kept per agent and overrides until what they came from changes
(decision 0041): a config change, a reloaded agent, another model capacity or another set of
declaring plugins resolves again, and a stale policy is never served."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.kernel.policy import PolicyLimit
from soulacy.plugins.policy import ModelCapacity
from soulacy.plugins.policy._cache import MAX_ENTRIES, POLICY_CACHE
from soulacy.testing import Workspace, throwaway_plugin

Make = Callable[..., Kernel]


@pytest.fixture
def kernel(workspace: Workspace, make_kernel: Make) -> Kernel:
    workspace.write_config("runtime:\n  default_max_turns: 40\n")
    workspace.write_agent("a", {"id": "a"})
    workspace.write_agent("b", {"id": "b", "max_turns": 7})
    return make_kernel()


def test_a_second_resolution_is_the_same_policy(kernel: Kernel) -> None:
    first = kernel.resolve_policy("a")
    assert kernel.resolve_policy("a") is first
    assert kernel.resolve_policy("a", {}) is first
    assert kernel.resolve_policy("b") is not first
    assert kernel.resolve_policy("b").max_turns.value == 7


def test_a_config_change_is_seen_by_the_next_resolution(kernel: Kernel) -> None:
    assert kernel.resolve_policy("a").max_turns.value == 40
    kernel.update_config({"runtime.default_max_turns": 12})  # what PATCH /config does
    assert kernel.resolve_policy("a").max_turns.value == 12
    assert kernel.resolve_policy("a", {"max_turns": 3}).max_turns.value == 3


async def test_a_run_after_a_config_change_publishes_the_new_limits(
    workspace: Workspace, make_kernel: Make
) -> None:
    workspace.scripted_agent("s", [{"text": "done"}], repeat=True)
    kernel = make_kernel(plugins=["no:sqlite_store"])
    published: list[Any] = []
    kernel.events.observe(lambda event: published.append(event.data), types=("run.limits",))
    await kernel.run("s", "go")
    kernel.update_config({"runtime.default_max_turns": 12, "runtime.timeouts.tool": "7s"})
    await kernel.run("s", "go")
    assert [limits["max_turns"]["value"] for limits in published] == [256, 12]
    assert published[1]["tool_timeout"]["text"] == "7s"


def test_a_reloaded_agent_is_seen(kernel: Kernel, workspace: Workspace) -> None:
    assert kernel.resolve_policy("b").max_turns.value == 7
    workspace.write_agent("b", {"id": "b", "max_turns": 9})
    assert kernel.resolve_policy("b").max_turns.value == 7  # the kernel keeps its loaded copy
    kernel.forget_agent("b")  # what the portal's agent editor does after saving
    assert kernel.resolve_policy("b").max_turns.value == 9


def test_a_model_capacity_that_changes_is_seen(workspace: Workspace, make_kernel: Make) -> None:
    capacity = [ModelCapacity(max_output_tokens=100)]
    plugin = throwaway_plugin(
        "capacity", soulacy_model_capacity=lambda kernel, provider, model: capacity[0]
    )
    workspace.write_agent("a", {"id": "a"})
    kernel = make_kernel(extra_plugins=[plugin])
    assert kernel.resolve_policy("a").max_output_tokens.value == 100
    capacity[0] = ModelCapacity(max_output_tokens=50)  # a provider that learned its model
    assert kernel.resolve_policy("a").max_output_tokens.value == 50


def test_a_plugin_registered_later_declares_its_limit(kernel: Kernel) -> None:
    assert "probe_limit" not in kernel.resolve_policy("a").extra
    declared = PolicyLimit("probe_limit", "runtime.no_progress_limit", 5)
    plugin = throwaway_plugin("probe", soulacy_policy_limits=lambda: [declared])
    kernel.pm.register(plugin)
    try:
        assert kernel.resolve_policy("a").limit("probe_limit").value == 20
    finally:
        kernel.pm.unregister(plugin)
    assert "probe_limit" not in kernel.resolve_policy("a").extra


def test_overrides_are_kept_apart_by_value_and_type(kernel: Kernel) -> None:
    assert kernel.resolve_policy("a", {"max_turns": 1}).max_turns.value == 1
    assert kernel.resolve_policy("a", {"max_turns": 2}).max_turns.value == 2
    # True == 1 in Python; the request's boolean is still refused, as without the cache.
    with pytest.raises(ConfigError, match="boolean"):
        kernel.resolve_policy("a", {"max_turns": True})
    nested = {"budget": {"max_tokens": 10}}
    assert kernel.resolve_policy("a", nested).max_tokens.value == 10
    assert kernel.resolve_policy("a", {"budget": {"max_tokens": 11}}).max_tokens.value == 11


def test_bad_overrides_are_refused_every_time(kernel: Kernel) -> None:
    for _ in range(2):
        with pytest.raises(ConfigError, match="expected -1 or more"):
            kernel.resolve_policy("a", {"max_turns": -5})


def test_the_cache_is_bounded(kernel: Kernel) -> None:
    for n in range(MAX_ENTRIES + 20):
        kernel.resolve_policy("a", {"max_turns": n + 1})
    assert len(kernel.stash[POLICY_CACHE]) == MAX_ENTRIES
    assert kernel.resolve_policy("a", {"max_turns": 3}).max_turns.value == 3


def test_to_dict_is_a_fresh_copy_of_the_shared_policy(kernel: Kernel) -> None:
    shown = kernel.resolve_policy("a").to_dict()
    shown["max_turns"]["value"] = "tampered"
    shown["extra_key"] = 1
    again = kernel.resolve_policy("a").to_dict()
    assert again["max_turns"]["value"] == 40
    assert "extra_key" not in again


def test_a_changed_copy_shows_its_own_limits(kernel: Kernel) -> None:
    policy = kernel.resolve_policy("a")
    policy.to_dict()  # formatted once, on the original
    changed = policy.with_limits(max_turns=policy.max_turns.__class__(3, "wrapper"))
    assert changed.to_dict()["max_turns"] == {"value": 3, "unlimited": False, "source": "wrapper"}
    assert policy.to_dict()["max_turns"]["value"] == 40
