"""The builtin ``providers`` plugin: which provider a name means, and what a model can hold.

It answers ``soulacy_provider_registry`` last (``trylast``), as pytest registers its own
behaviour, with a :class:`ConfiguredProviders` for the kernel:

- a **name** is an entry of ``llm.providers`` (its ``type`` one of the provider types that
  plugins contribute through ``soulacy_provider_types``), else a bare provider type used with
  its defaults (``llm: {provider: scripted}``); anything else is a ``UsageError`` naming both
  lists;
- an **agent's model** is its ``llm.provider`` (else ``llm.default.provider``) and its
  ``llm.model``, else the entry's ``model``, else ``llm.default.model``;
- a model's **capacity** is the entry's ``context_window`` and ``max_output_tokens`` where
  config.yaml states them, else what the provider reports;
- each entry is built once per kernel, on first use, and closed with the kernel.

Block it with ``-p no:providers`` and load a plugin that answers the hook to resolve providers
another way (from a service catalogue, say); with none, asking for a provider is a PluginError
naming the hook.
"""

from __future__ import annotations

from collections.abc import Mapping

from soulacy.kernel import AgentSpec, Kernel, UsageError, hookimpl
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import Provider, ProviderConfig

__all__ = ["ConfiguredProviders"]


class ConfiguredProviders:
    """The providers of config.yaml's ``llm.providers`` and of the loaded provider types."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._built: dict[str, Provider] = {}

    def config(self, name: str) -> ProviderConfig:
        kernel = self.kernel
        configured: Mapping[str, ProviderConfig] = kernel.config.section("llm.providers")
        if name in configured:
            return configured[name]
        types = kernel.provider_types()
        if name in types:
            return ProviderConfig(type=name)
        raise UsageError(
            f"unknown provider {name!r}: configure it under llm.providers in {kernel.config_file}"
            f" (configured: {', '.join(sorted(configured)) or 'none'};"
            f" types: {', '.join(sorted(types)) or 'none'})"
        )

    def provider(self, name: str) -> Provider:
        if name not in self._built:
            config = self.config(name)
            types = self.kernel.provider_types()
            kind = types.get(config.type)
            if kind is None:
                raise UsageError(
                    f"llm.providers.{name}.type: no loaded plugin provides"
                    f" {config.type!r} (known: {', '.join(sorted(types)) or 'none'})"
                )
            self._built[name] = kind.create(name, config, self.kernel)
        return self._built[name]

    def model_of(self, agent: AgentSpec) -> tuple[str, str | None]:
        kernel = self.kernel
        llm, default = agent.section("llm"), kernel.config.section("llm.default")
        name = llm.provider or default.provider
        if not name:
            raise UsageError(
                f"agent {agent.id!r} names no llm.provider in {agent.file} and"
                f" llm.default.provider is not set in {kernel.config_file}"
            )
        model = llm.model or self.config(name).model or default.model
        return name, model

    def capacity(self, provider: str | None, model: str | None) -> ModelCapacity | None:
        config_of = self.kernel.config.section
        if provider is None:
            provider = config_of("llm.default").provider
        if provider is None or (
            provider not in config_of("llm.providers")
            and provider not in self.kernel.provider_types()
        ):
            return None  # unknown here; a run with it fails with a clear error instead
        config = self.config(provider)
        reported = self.provider(provider).capacity(model or config.model) or ModelCapacity()
        return ModelCapacity(
            context_window=config.context_window or reported.context_window,
            max_output_tokens=config.max_output_tokens or reported.max_output_tokens,
        )

    async def aclose(self) -> None:
        built, self._built = list(self._built.values()), {}
        for provider in built:
            await provider.aclose()


@hookimpl(trylast=True)
def soulacy_provider_registry(kernel: Kernel) -> ConfiguredProviders:
    return ConfiguredProviders(kernel)
