"""The builtin ``providers`` plugin resolves provider names; a plugin can replace it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import AgentSpec, Kernel, PluginError, UsageError
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import Provider, ProviderConfig, ProviderRegistry, TextSink
from soulacy.plugins.providers import ConfiguredProviders
from soulacy.testing import Workspace, throwaway_plugin


@pytest.mark.parametrize(
    "module", ["soulacy.kernel", "soulacy.kernel.providers", "soulacy.plugins.providers"]
)
def test_the_kernel_and_the_registry_do_not_import_httpx(module: str) -> None:
    code = f"import sys, {module}; assert 'httpx' not in sys.modules, 'httpx imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_builtin_registry_answers_last(make_kernel: Callable[..., Kernel]) -> None:
    kernel = make_kernel()
    assert isinstance(kernel.providers, ConfiguredProviders)
    assert kernel.providers is kernel.providers  # asked once per kernel
    (impl,) = kernel.hook.soulacy_provider_registry.get_hookimpls()
    assert (impl.plugin_name, impl.trylast) == ("providers", True)


async def test_entries_are_built_once_and_closed_with_the_kernel(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "llm:\n  providers:\n    fake:\n      type: scripted\n      context_window: 100\n"
    )
    kernel = make_kernel()
    assert kernel.providers.provider("fake") is kernel.providers.provider("fake")
    assert kernel.providers.config("fake").context_window == 100
    assert kernel.providers.capacity("fake", None) == ModelCapacity(100, None)
    registry = kernel.providers
    await kernel.aclose()
    assert kernel.providers is not registry  # asked again after a close
    with pytest.raises(UsageError, match=r"unknown provider 'nope'.*types: .*scripted"):
        kernel.providers.provider("nope")


class Echo:
    """A provider that repeats the last user message."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def capacity(self, model: str | None) -> ModelCapacity | None:
        return ModelCapacity(1000, 100)

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        last = request.messages[-1].content
        return ModelReply(Message("assistant", f"{request.model}: {last}"), Usage(1, 1), "stop")

    async def aclose(self) -> None:
        self.closed = True


class Catalogue:
    """A registry that knows one provider, whatever config.yaml says: every name is it."""

    def __init__(self) -> None:
        self.echo = Echo("catalogue")
        self.asked: list[str] = []

    def provider(self, name: str) -> Provider:
        self.asked.append(name)
        return self.echo

    def config(self, name: str) -> ProviderConfig:
        return ProviderConfig(type="echo")

    def model_of(self, agent: AgentSpec) -> tuple[str, str | None]:
        return "catalogue", f"model-of-{agent.id}"

    def capacity(self, provider: str | None, model: str | None) -> ModelCapacity | None:
        return self.echo.capacity(model)

    async def aclose(self) -> None:
        await self.echo.aclose()


async def test_a_plugin_replaces_provider_resolution_for_a_real_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", "llm: {provider: nowhere}\n")  # no such type or entry
    catalogue = Catalogue()
    registry: ProviderRegistry = catalogue  # the protocol is what a replacement implements
    plugin = throwaway_plugin("catalogue", soulacy_provider_registry=lambda kernel: registry)
    kernel = make_kernel(plugins=["no:providers"], extra_plugins=[plugin])
    result = await kernel.run("a", "hello")
    assert (result.status, result.reply) == ("completed", "model-of-a: hello")
    assert catalogue.asked == ["catalogue"]
    await kernel.aclose()
    assert catalogue.echo.closed


async def test_without_a_registry_a_run_fails_naming_the_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:providers"])
    with pytest.raises(PluginError, match=r"soulacy_provider_registry.*'providers' plugin"):
        await kernel.run("a", "hello")


def test_an_agent_without_a_provider_is_a_usage_error(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_agent("a", "name: a\n")
    kernel = make_kernel()
    with pytest.raises(UsageError, match=r"names no llm\.provider"):
        kernel.providers.model_of(kernel.agent("a"))


def test_the_model_falls_back_to_the_entry_then_the_workspace_default(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        "llm:\n  default: {provider: p, model: d}\n"
        "  providers:\n    p: {type: scripted, model: e}\n    q: {type: scripted}\n"
    )
    workspace.write_agent("own", "llm: {model: m}\n")
    workspace.write_agent("entry", "name: entry\n")
    workspace.write_agent("default", "llm: {provider: q}\n")
    kernel = make_kernel()
    model_of = kernel.providers.model_of
    models: dict[str, Any] = {a: model_of(kernel.agent(a)) for a in kernel.agent_ids()}
    assert models == {"own": ("p", "m"), "entry": ("p", "e"), "default": ("q", "d")}
