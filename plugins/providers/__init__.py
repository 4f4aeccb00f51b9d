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

It also owns the provider configuration: it declares the ``llm.default`` and ``llm.providers``
sections of config.yaml, checks that every entry's ``type`` is a loaded provider type
(``soulacy_validate_config``), and answers ``soulacy_model_capacity`` last (``trylast``) with
what the kernel's registry says (``kernel.providers.capacity``), so that a plugin answering
first, or a registry answering first, decides a model's capacity instead.

Block it with ``-p no:providers`` and load a plugin that answers the hook to resolve providers
another way (from a service catalogue, say); with none, asking for a provider is a PluginError
naming the hook. Blocked, it takes its sections, its check and its capacity answer with it:
a replacement declares the configuration it reads and answers ``soulacy_model_capacity`` itself
when the execution policy should know its models' capacity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from soulacy.kernel import ConfigIssue, ConfigSection, Location, Settings, UsageError, hookimpl
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import Provider, ProviderConfig

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec, Kernel

__all__ = ["ConfiguredProviders", "DefaultModel"]

_KEPT_CAPACITIES = 256


@attrs.frozen
class DefaultModel:
    """``llm.default`` in config.yaml: the workspace provider and model new agents start with."""

    provider: str | None = None
    model: str | None = None


class ConfiguredProviders:
    """The providers of config.yaml's ``llm.providers`` and of the loaded provider types."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._built: dict[str, Provider] = {}
        self._bare: dict[str, ProviderConfig] = {}  # by type name: as many as the loaded types
        # The capacity last worked out per (provider, model): the Settings it was read from,
        # the entry's configuration, what the provider reported and the answer. Asked on every
        # run (the policy): a new answer only when the configuration is another object or the
        # provider reports something else (it may learn its model's capacity while it runs).
        self._capacities: dict[
            tuple[str, str | None],
            tuple[Settings, ProviderConfig, ModelCapacity | None, ModelCapacity],
        ] = {}

    def config(self, name: str) -> ProviderConfig:
        kernel = self.kernel
        configured: Mapping[str, ProviderConfig] = kernel.config.section("llm.providers")
        if name in configured:
            return configured[name]
        types = kernel.provider_types()
        if name in types:  # a bare type with its defaults: the same frozen value every run
            bare = self._bare.get(name)
            if bare is None:
                bare = self._bare[name] = ProviderConfig(type=name)
            return bare
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
        settings = self.kernel.config
        if provider is None:
            provider = settings.section("llm.default").provider
        if provider is None or (
            provider not in settings.section("llm.providers")
            and provider not in self.kernel.provider_types()
        ):
            return None  # unknown here; a run with it fails with a clear error instead
        kept = self._capacities.get((provider, model))
        fresh = kept is not None and kept[0] is settings
        config = kept[1] if kept is not None and fresh else self.config(provider)
        reported = self.provider(provider).capacity(model or config.model)
        if kept is not None and fresh and kept[2] == reported:
            return kept[3]
        reported_or_none = reported or ModelCapacity()
        answer = ModelCapacity(
            context_window=config.context_window or reported_or_none.context_window,
            max_output_tokens=config.max_output_tokens or reported_or_none.max_output_tokens,
        )
        if len(self._capacities) >= _KEPT_CAPACITIES:  # models are named by callers: bounded
            self._capacities.clear()
        self._capacities[(provider, model)] = (settings, config, reported, answer)
        return answer

    async def aclose(self) -> None:
        built, self._built = list(self._built.values()), {}
        for provider in built:
            await provider.aclose()


@hookimpl(trylast=True)
def soulacy_provider_registry(kernel: Kernel) -> ConfiguredProviders:
    return ConfiguredProviders(kernel)


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [
        ConfigSection("llm.default", DefaultModel, doc="provider and model of new agents"),
        ConfigSection(
            "llm.providers", dict[str, ProviderConfig], default=dict, doc="model providers by name"
        ),
        # Which variable of the server's environment goes to the provider's endpoint: any
        # (another principal's key, a database password) if an admin could choose it.
        ConfigSection.trust_root(
            "llm.providers.*.api_key_env",
            doc="which environment variable is sent to the provider as its key",
        ),
    ]


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    types = kernel.provider_types()
    issues = []
    for name, provider in config.section("llm.providers").items():
        if provider.type not in types:
            path = f"llm.providers.{name}.type"
            loc = config.source_of(path) or Location(str(config.file))
            known = ", ".join(sorted(types)) or "none"
            message = f"no loaded plugin provides this provider type (known: {known})"
            issues.append(ConfigIssue(loc, path, message, provider.type, True))
    return issues


@hookimpl(trylast=True)
def soulacy_model_capacity(
    kernel: Kernel, provider: str | None, model: str | None
) -> ModelCapacity | None:
    return kernel.providers.capacity(provider, model)
