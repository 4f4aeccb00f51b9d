"""The provider toolkit: what HTTP model providers share, as a library (not a plugin).

The kernel defines what a provider is (``soulacy.kernel.providers``: the ``Provider`` protocol,
``ProviderConfig``, ``ProviderType`` and the errors the engine understands) and imports no HTTP
client. This module holds the plumbing that providers speaking to a model API over httpx would
otherwise each write again: the retry loop with backoff and ``Retry-After``, the API key lookup,
the streamed-text guard, and :class:`HTTPProvider`, a base class that does the client, the
requests, the server-sent events and the error answers, leaving the wire format to a subclass.
The builtin ``openai`` provider and the contrib ``anthropic`` provider are both written on it;
a third-party provider may be too. Importing it registers nothing.
"""

from ._http import HTTPProvider, Refusal, StreamReader, json_text, tool_arguments
from ._retries import (
    MAX_BACKOFF,
    SentText,
    api_key,
    backoff_delay,
    call_with_retries,
    retry_after_seconds,
)

__all__ = [
    "MAX_BACKOFF",
    "HTTPProvider",
    "Refusal",
    "SentText",
    "StreamReader",
    "api_key",
    "backoff_delay",
    "call_with_retries",
    "json_text",
    "retry_after_seconds",
    "tool_arguments",
]
