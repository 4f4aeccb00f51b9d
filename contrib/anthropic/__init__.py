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

Written only against the public kernel APIs (``soulacy.kernel`` and its ``messages``,
``providers`` and ``policy`` modules), as a third-party plugin would be. Retries 429, 529 and
other 5xx answers (and dropped connections) with backoff, honouring ``Retry-After``; a
"prompt is too long" refusal becomes ``ContextLengthExceeded`` with the limit it states.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import Any, cast

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

__all__ = ["AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; used when nothing else states it
PATH = "/v1/messages"


class AnthropicProvider:
    def __init__(self, name: str, config: ProviderConfig, environ: Any = os.environ) -> None:
        self.name = name
        self.config = config
        key = api_key(name, config, environ)
        version = str(config.options.get("anthropic_version") or API_VERSION)
        headers = {"anthropic-version": version, "content-type": "application/json"}
        if key:  # a local proxy may need none
            headers["x-api-key"] = key
        self._client = httpx.AsyncClient(
            base_url=config.base_url or DEFAULT_BASE_URL, headers=headers, timeout=None
        )

    def capacity(self, model: str | None) -> ModelCapacity | None:
        if self.config.context_window or self.config.max_output_tokens:
            return ModelCapacity(self.config.context_window, self.config.max_output_tokens)
        return None

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

        async def attempt_once(sent: SentText) -> ModelReply:
            if stream:
                return await self._stream(body, sent)
            response = await self._client.post(PATH, json=body)
            if response.status_code == 200:
                return _wire.reply(response.json())
            raise self._failure(response.status_code, response.text, response.headers)

        return await call_with_retries(self.name, self.config.max_retries, on_text, attempt_once)

    async def _stream(self, body: dict[str, Any], on_text: SentText) -> ModelReply:
        assembler = _wire.StreamAssembler()
        async with self._client.stream("POST", PATH, json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                raise self._failure(response.status_code, text, response.headers)
            # aclosing: a line iterator left unfinished (an exception, a cancelled call) is
            # closed here rather than by the garbage collector. The stream is read to its end.
            # (httpx types aiter_lines as an iterator; it is an async generator.)
            lines_of = cast("AsyncGenerator[str, None]", response.aiter_lines())
            async with aclosing(lines_of) as lines:
                async for line in lines:
                    if assembler.error is not None or not line.startswith("data:"):
                        continue  # "event:" lines repeat the data's "type"
                    try:
                        event = json.loads(line[5:].strip())
                    except ValueError:
                        event = {"type": "error", "error": {"message": f"bad event: {line!r}"}}
                    delta = assembler.feed(event)
                    if delta:
                        await on_text(delta)
        if assembler.error is not None:
            kind, message = _wire.error_of({"error": assembler.error}, "")
            status = _wire.STREAM_ERROR_STATUS.get(kind)
            raise ProviderError(
                f"provider {self.name!r} failed mid-stream: {kind or 'error'}: {message}",
                status=status,
                retryable=status is not None and not on_text.any,
            )
        if not assembler.stopped:
            raise ProviderError(
                f"provider {self.name!r}: the stream ended before message_stop",
                retryable=not on_text.any,
            )
        return assembler.reply()

    def _failure(self, status: int, text: str, headers: httpx.Headers) -> ProviderError:
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        kind, detail = _wire.error_of(body, text)
        message = f"provider {self.name!r} answered {status}: {kind + ': ' if kind else ''}{detail}"
        exceeded, limit, requested = _wire.context_limit(status, detail)
        if exceeded:
            return ContextLengthExceeded(message, limit=limit, requested=requested)
        return ProviderError(
            message,
            status=status,
            retryable=status == 429 or status >= 500,  # 529 is "overloaded"
            retry_after=retry_after_seconds(headers.get("retry-after")),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _create(name: str, config: ProviderConfig, kernel: Kernel) -> AnthropicProvider:
    return AnthropicProvider(name, config, kernel.environ)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("anthropic", _create)]
