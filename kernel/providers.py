"""Public names for provider plugins: the protocol, configuration, kinds and errors."""

from ._providers import (
    ContextLengthExceeded,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    TextSink,
)

__all__ = [
    "ContextLengthExceeded",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderType",
    "TextSink",
]
