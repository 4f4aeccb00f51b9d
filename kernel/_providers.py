"""Model providers: the protocols a model client and a provider registry implement, the
configuration a provider type is given, and the errors the engine understands.

No HTTP client here: the plumbing of HTTP providers is the provider toolkit's
(``soulacy.plugins.providerkit``), the registry the builtin ``providers`` plugin's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ._errors import SoulacyError
from ._messages import ModelReply, ModelRequest
from .policy import ModelCapacity

if TYPE_CHECKING:
    from ._kernel import AgentSpec, Kernel

TextSink = Callable[[str], Awaitable[None]]


class Provider(Protocol):
    """A client of one model API, configured under ``llm.providers.<name>``."""

    name: str

    def capacity(self, model: str | None) -> ModelCapacity | None:
        """The model's context window and output capacity, when the provider knows them."""

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        """Call the model once. With ``request.stream``, text deltas go to ``on_text`` as they
        arrive; the reply is complete either way."""

    async def aclose(self) -> None:
        """Release connections."""


class ProviderRegistry(Protocol):
    """Resolves provider names for one kernel (``soulacy_provider_registry``).

    The kernel asks for it once (``kernel.providers``) and closes it with the kernel; callers
    ask it directly (``kernel.providers.provider(name)``). What a run's policy takes as a
    model's capacity is ``soulacy_model_capacity``'s answer, which the builtin registry's
    :meth:`capacity` gives last.
    """

    def provider(self, name: str) -> Provider:
        """The provider called ``name`` (an unknown name is a ``UsageError``)."""

    def config(self, name: str) -> ProviderConfig:
        """The configuration the provider ``name`` is (or would be) built from."""

    def model_of(self, agent: AgentSpec) -> tuple[str, str | None]:
        """The provider name and model that ``agent`` uses."""

    def capacity(self, provider: str | None, model: str | None) -> ModelCapacity | None:
        """The capacity of ``model`` on ``provider`` (None: the workspace default), or None
        when unknown."""

    async def aclose(self) -> None:
        """Close the providers it built."""


@attrs.frozen
class ProviderConfig:
    """One entry of ``llm.providers`` in config.yaml.

    ``type`` picks the implementation (``openai``, ``scripted``, …); ``api_key_env`` names an
    environment variable so that keys stay out of files; ``context_window`` and
    ``max_output_tokens`` state the model's capacity when the API does not report it.
    """

    type: str
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    model: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_retries: int = 5
    stream: bool = False
    options: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class ProviderType:
    """A kind of provider a plugin contributes: ``create(name, config, kernel)`` builds one."""

    name: str
    create: Callable[[str, ProviderConfig, Kernel], Provider]


class ProviderError(SoulacyError):
    """A model call failed for a reason the provider reported (after its retries)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after  # seconds the provider asked us to wait, if it did


class ContextLengthExceeded(ProviderError):
    """The provider refused the input as too long; ``limit`` is its actual limit in tokens."""

    def __init__(
        self, message: str, *, limit: int | None = None, requested: int | None = None
    ) -> None:
        super().__init__(message, status=400)
        self.limit = limit
        self.requested = requested
