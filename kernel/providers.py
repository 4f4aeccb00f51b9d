"""Public names for provider plugins: the protocols, configuration, kinds and errors.

The retry loop, ``Retry-After``, the API key lookup and the HTTP plumbing that used to be
here are the provider toolkit's: :mod:`soulacy.plugins.providerkit`.
"""

from ._providers import (
    ContextLengthExceeded,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderRegistry,
    ProviderType,
    TextSink,
)

__all__ = [
    "ContextLengthExceeded",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderRegistry",
    "ProviderType",
    "TextSink",
]
