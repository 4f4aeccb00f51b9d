"""The builtin ``openai`` provider: OpenAI-compatible Chat Completions over httpx.

It serves OpenAI and the servers that speak its protocol (vLLM, Ollama, llama.cpp, LM Studio…)::

    llm:
      providers:
        local:
          type: openai
          base_url: http://127.0.0.1:8000/v1
          api_key_env: LOCAL_API_KEY     # or api_key; optional for local servers
          model: qwen2.5-7b-instruct
          context_window: 32768
          max_output_tokens: 8192
          stream: true

Retries 429 and 5xx answers (and dropped connections) with backoff, honouring ``Retry-After``;
a context-length refusal becomes ``ContextLengthExceeded`` carrying the server's actual limit.
The client, retries and event stream are the provider toolkit's (``soulacy.plugins.providerkit``);
this plugin is the Chat Completions wire format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulacy.kernel import hookimpl, lazy_exports

if TYPE_CHECKING:  # the provider imports httpx and trio: registering does not (decision 0038)
    from soulacy.kernel.providers import ProviderType

    from ._provider import OpenAIProvider

__all__ = ["OpenAIProvider"]


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(
        __name__, {"OpenAIProvider": "._provider", "DEFAULT_BASE_URL": "._provider"}
    )


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    from ._provider import OpenAIProvider

    return [OpenAIProvider.provider_type("openai")]
