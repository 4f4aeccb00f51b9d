"""Public names for provider plugins: the protocol, configuration, kinds and errors."""

from ._providers import (
    MAX_BACKOFF,
    ContextLengthExceeded,
    Provider,
    ProviderConfig,
    ProviderError,
    ProviderType,
    SentText,
    TextSink,
    api_key,
    backoff_delay,
    call_with_retries,
    retry_after_seconds,
)

__all__ = [
    "MAX_BACKOFF",
    "ContextLengthExceeded",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderType",
    "SentText",
    "TextSink",
    "api_key",
    "backoff_delay",
    "call_with_retries",
    "retry_after_seconds",
]
