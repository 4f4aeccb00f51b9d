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
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import attrs
import httpx

from soulacy.kernel import Kernel, hookimpl
from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import (
    ContextLengthExceeded,
    ProviderConfig,
    ProviderError,
    ProviderType,
    SentText,
    TextSink,
    api_key,
    call_with_retries,
    retry_after_seconds,
)

from . import _wire

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIProvider:
    def __init__(self, name: str, config: ProviderConfig, environ: Any = os.environ) -> None:
        self.name = name
        self.config = config
        key = api_key(name, config, environ)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            base_url=config.base_url or DEFAULT_BASE_URL, headers=headers, timeout=None
        )

    def capacity(self, model: str | None) -> ModelCapacity | None:
        if self.config.context_window or self.config.max_output_tokens:
            return ModelCapacity(self.config.context_window, self.config.max_output_tokens)
        return None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        stream = request.stream or self.config.stream
        body = _wire.request_body(
            attrs.evolve(request, stream=stream),
            request.model or self.config.model,
            self.config.options,
        )

        async def attempt_once(sent: SentText) -> ModelReply:
            if stream:
                return await self._stream(body, sent)
            response = await self._client.post("/chat/completions", json=body)
            if response.status_code == 200:
                return _wire.reply(response.json())
            raise self._failure(response.status_code, response.text, response.headers)

        return await call_with_retries(self.name, self.config.max_retries, on_text, attempt_once)

    async def _stream(self, body: dict[str, Any], on_text: SentText) -> ModelReply:
        assembler = _wire.StreamAssembler()
        async with self._client.stream("POST", "/chat/completions", json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                raise self._failure(response.status_code, text, response.headers)
            done = False
            # Read to the end rather than break at [DONE]: an abandoned httpx line iterator is
            # an async generator left for the garbage collector.
            async for line in response.aiter_lines():
                if done or not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    continue
                delta = assembler.feed(json.loads(data))
                if delta:
                    await on_text(delta)
        return assembler.reply()

    def _failure(self, status: int, text: str, headers: httpx.Headers) -> ProviderError:
        try:
            body = json.loads(text)
        except ValueError:
            body = {"error": {"message": text[:500]}}
        if not isinstance(body, dict):
            body = {"error": {"message": str(body)[:500]}}
        exceeded, limit, requested = _wire.context_limit(status, body)
        error = body.get("error")
        detail = error.get("message") if isinstance(error, dict) else text[:500]
        message = f"provider {self.name!r} answered {status}: {detail}"
        if exceeded:
            return ContextLengthExceeded(message, limit=limit, requested=requested)
        return ProviderError(
            message,
            status=status,
            retryable=status == 429 or status >= 500,
            retry_after=retry_after_seconds(headers.get("retry-after")),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _create(name: str, config: ProviderConfig, kernel: Kernel) -> OpenAIProvider:
    return OpenAIProvider(name, config, kernel.environ)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("openai", _create)]
