"""The ``openai`` provider itself: the Chat Completions wire format on the provider toolkit's
client (httpx, trio). Imported when a kernel builds its providers, not when the plugin is
registered (decision 0038)."""

from __future__ import annotations

import json
from typing import Any

import attrs

from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.providers import TextSink
from soulacy.plugins.providerkit import HTTPProvider, Refusal, StreamReader

from . import _wire

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
