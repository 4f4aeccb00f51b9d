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

import json
from collections.abc import Sequence
from typing import Any

import attrs

from soulacy.kernel import hookimpl
from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.providers import ProviderType, TextSink
from soulacy.plugins.providerkit import HTTPProvider, Refusal, StreamReader

from . import _wire

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIProvider(HTTPProvider):
    default_base_url = DEFAULT_BASE_URL
    path = "/chat/completions"

    def headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        stream = request.stream or self.config.stream
        body = _wire.request_body(
            attrs.evolve(request, stream=stream),
            request.model or self.config.model,
            self.config.options,
        )
        return await self.send(body, on_text, stream=stream)

    def parse_reply(self, body: Any) -> ModelReply:
        return _wire.reply(body)

    def stream_reader(self) -> StreamReader:
        return _wire.StreamAssembler()

    def refusal(self, status: int, text: str) -> Refusal:
        try:
            body = json.loads(text)
        except ValueError:
            body = {"error": {"message": text[:500]}}
        if not isinstance(body, dict):
            body = {"error": {"message": str(body)[:500]}}
        exceeded, limit, requested = _wire.context_limit(status, body)
        error = body.get("error")
        detail = error.get("message") if isinstance(error, dict) else body.get("message")
        detail = detail or (error if isinstance(error, str) else text[:500])
        return Refusal(str(detail), exceeded, limit, requested)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [OpenAIProvider.provider_type("openai")]
