"""A contrib provider for the Anthropic Messages API over httpx, off by default.

Enable it with ``soulacy -p soulacy.contrib.anthropic …`` or in config.yaml::

    plugins:
      enable: [soulacy.contrib.anthropic]
    llm:
      providers:
        claude:
          type: anthropic
          api_key_env: ANTHROPIC_API_KEY
          model: claude-sonnet-4-5
          context_window: 200000
          max_output_tokens: 8192

Written only against public APIs (``soulacy.kernel`` and its ``messages``, ``providers`` and
``policy`` modules, and the provider toolkit ``soulacy.plugins.providerkit``), as a third-party
plugin would be. Retries 429, 529 and other 5xx answers (and dropped connections) with backoff,
honouring ``Retry-After``; a "prompt is too long" refusal becomes ``ContextLengthExceeded`` with
the limit it states.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from soulacy.kernel import hookimpl
from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.providers import ProviderError, ProviderType, TextSink
from soulacy.plugins.providerkit import HTTPProvider, Refusal, StreamReader

from . import _wire

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; used when nothing else states it
PATH = "/v1/messages"


class AnthropicProvider(HTTPProvider):
    default_base_url = DEFAULT_BASE_URL
    path = PATH

    def headers(self, key: str | None) -> dict[str, str]:
        version = str(self.config.options.get("anthropic_version") or API_VERSION)
        headers = {"anthropic-version": version, "content-type": "application/json"}
        if key:  # a local proxy may need none
            headers["x-api-key"] = key
        return headers

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        model = request.model or self.config.model
        if not model:
            raise ProviderError(
                f"provider {self.name!r}: no model: set llm.providers.{self.name}.model"
                " or the agent's llm.model"
            )
        stream = request.stream or self.config.stream
        max_tokens = (
            request.max_output_tokens or self.config.max_output_tokens or DEFAULT_MAX_TOKENS
        )
        body = _wire.request_body(request, model, max_tokens, stream)
        return await self.send(body, on_text, stream=stream)

    def parse_reply(self, body: Any) -> ModelReply:
        return _wire.reply(body)

    def stream_reader(self) -> StreamReader:
        return _wire.StreamAssembler(self.name)

    def refusal(self, status: int, text: str) -> Refusal:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        kind, detail = _wire.error_of(body, text)
        exceeded, limit, requested = _wire.context_limit(status, detail)
        # 429 and every 5xx are retried by the toolkit: 529 is "overloaded".
        return Refusal(f"{kind + ': ' if kind else ''}{detail}", exceeded, limit, requested)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [AnthropicProvider.provider_type("anthropic")]
