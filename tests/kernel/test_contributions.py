"""The plugin manager's collector of named contributions: through pluggy, clashes named."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import pytest

from soulacy.kernel import Kernel, PluginError, hookimpl
from soulacy.testing import throwaway_plugin


def test_named_things_from_every_plugin_with_their_plugin(
    make_kernel: Callable[..., Kernel],
) -> None:
    async def mine(run: Any) -> None:
        """A strategy."""

    extra = throwaway_plugin("extra", soulacy_reasoning_strategies=lambda: {"mine": mine})
    kernel = make_kernel(extra_plugins=[extra])
    found = kernel.pm.unique_contributions("soulacy_reasoning_strategies", "reasoning strategy")
    assert found["mine"] == (mine, "extra")
    assert found["react"][1] == "reasoning"
    commands = kernel.pm.unique_contributions("soulacy_cli_commands", "command")
    assert commands["run"][1] == "core"  # a sequence of things with a name


def test_a_clash_names_both_plugins(make_kernel: Callable[..., Kernel]) -> None:
    extra = throwaway_plugin("extra", soulacy_reasoning_strategies=lambda: {"react": None})
    kernel = make_kernel(extra_plugins=[extra])
    clash = r"plugins 'reasoning' and 'extra' both define the reasoning strategy 'react'"
    with pytest.raises(PluginError, match=clash):
        kernel.pm.unique_contributions("soulacy_reasoning_strategies", "reasoning strategy")


def test_a_provider_type_two_plugins_define_names_both(make_kernel: Callable[..., Kernel]) -> None:
    from soulacy.kernel.providers import ProviderType

    twin = ProviderType("scripted", lambda name, config, kernel: None)  # type: ignore[arg-type,return-value]
    extra = throwaway_plugin("extra", soulacy_provider_types=lambda: [twin])
    clash = "plugins 'scripted' and 'extra' both define the provider type 'scripted'"
    with pytest.raises(PluginError, match=clash):  # the configuration's check asks first
        make_kernel(extra_plugins=[extra]).provider_types()


def test_each_plugin_is_called_through_pluggy_so_its_wrapper_applies(
    make_kernel: Callable[..., Kernel],
) -> None:
    seen: list[str] = []

    class Wrapped:
        name = "wrapped"

        @hookimpl(wrapper=True)
        def soulacy_reasoning_strategies(self) -> Generator[None, Any, Any]:
            seen.append("wrapper")
            return (yield)

        @hookimpl
        def soulacy_config_sections(self) -> list[Any]:
            return []

    kernel = make_kernel(extra_plugins=[Wrapped()])
    seen.clear()
    kernel.pm.named_contributions("soulacy_reasoning_strategies")
    assert seen == ["wrapper"]
