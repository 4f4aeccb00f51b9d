"""A provider for a JSON-over-HTTP model API: its client, retries, errors and event streams."""

from __future__ import annotations

import abc
import json
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import attrs

from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import (
    ContextLengthExceeded,
    ProviderConfig,
    ProviderError,
    ProviderType,
    TextSink,
)

from ._retries import SentText, api_key, call_with_retries, retry_after_seconds

if TYPE_CHECKING:
    import httpx

    from soulacy.kernel import Kernel


@attrs.frozen
class Refusal:
    """What an error answer says: its text, and whether it refused the input as too long
    (with the limit and the request's size in tokens, when it states them)."""

    detail: str
    too_long: bool = False
    limit: int | None = None
    requested: int | None = None


class StreamReader(Protocol):
    """Assembles one streamed answer from its server-sent events."""

    def feed(self, data: str) -> str:
        """Take the data of one event (a ``data:`` line); return its text delta, or ``""``."""

    def reply(self, shown: bool) -> ModelReply:
        """The reply once the stream has ended. A stream that ended incomplete raises a
        ``ProviderError``, retryable only when no text was ``shown`` yet."""


class HTTPProvider(abc.ABC):
    """The plumbing every HTTP provider repeats, written once.

    A subclass names its endpoint (``default_base_url``, ``path``), its headers, how to read a
    reply, a stream and an error answer, and builds the request body in ``complete``, which
    hands it to :meth:`send`. ``send`` posts it with :func:`call_with_retries` (429, 5xx and
    dropped connections retried, ``Retry-After`` honoured, no retry once streamed text was
    shown) and reads a stream's events to the end. The key comes from ``api_key`` or
    ``api_key_env`` (:func:`api_key`); the client has no timeout of its own, so that the run's
    ``llm_timeout`` bounds each call. ``context_window`` and ``max_output_tokens`` of the entry
    are the capacity it reports.
    """

    default_base_url: ClassVar[str]
    path: ClassVar[str]

    def __init__(
        self, name: str, config: ProviderConfig, environ: Mapping[str, str] = os.environ
    ) -> None:
        self.name = name
        self.config = config
        headers = self.headers(api_key(name, config, environ))
        import httpx  # here, not at import: `soulacy --help` and plugin loading need no httpx

        self._client = httpx.AsyncClient(
            base_url=config.base_url or self.default_base_url, headers=headers, timeout=None
        )

    @classmethod
    def provider_type(cls, type_name: str) -> ProviderType:
        """The provider type ``type_name`` of this class, for ``soulacy_provider_types``; it is
        built with the kernel's environment (where ``api_key_env`` is read)."""

        def create(name: str, config: ProviderConfig, kernel: Kernel) -> HTTPProvider:
            return cls(name, config, kernel.environ)

        return ProviderType(type_name, create)

    # -- what a subclass says ----------------------------------------------------------------

    @abc.abstractmethod
    def headers(self, key: str | None) -> dict[str, str]:
        """The headers of every request; ``key`` is None when the entry sets none."""

    @abc.abstractmethod
    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        """Build the body of ``request`` and return ``await self.send(body, on_text, ...)``."""

    @abc.abstractmethod
    def parse_reply(self, body: Any) -> ModelReply:
        """The reply of a 200 answer's JSON body."""

    @abc.abstractmethod
    def stream_reader(self) -> StreamReader:
        """A new reader for one streamed answer."""

    @abc.abstractmethod
    def refusal(self, status: int, text: str) -> Refusal:
        """What an answer other than 200 says (``text`` is its body)."""

    # -- what it does ------------------------------------------------------------------------

    def capacity(self, model: str | None) -> ModelCapacity | None:
        if self.config.context_window or self.config.max_output_tokens:
            return ModelCapacity(self.config.context_window, self.config.max_output_tokens)
        return None

    async def send(
        self, body: Mapping[str, Any], on_text: TextSink | None, *, stream: bool
    ) -> ModelReply:
        """POST ``body`` to ``path`` and return the reply, retrying as the class says."""

        async def attempt_once(sent: SentText) -> ModelReply:
            if stream:
                return await self._stream(body, sent)
            response = await self._client.post(self.path, json=body)
            if response.status_code == 200:
                return self.parse_reply(response.json())
            raise self.failure(response.status_code, response.text, response.headers)

        return await call_with_retries(self.name, self.config.max_retries, on_text, attempt_once)

    async def _stream(self, body: Mapping[str, Any], sent: SentText) -> ModelReply:
        reader = self.stream_reader()
        async with self._client.stream("POST", self.path, json=body) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                raise self.failure(response.status_code, text, response.headers)
            # aclosing: a line iterator left unfinished (an exception, a cancelled call) is
            # closed here rather than by the garbage collector; a complete stream is read to
            # its end. (httpx types aiter_lines as an iterator; it is an async generator.)
            lines_of = cast("AsyncGenerator[str, None]", response.aiter_lines())
            async with aclosing(lines_of) as lines:
                async for line in lines:
                    if not line.startswith("data:"):
                        continue  # "event:" lines, comments, the blank line between events
                    delta = reader.feed(line[5:].strip())
                    if delta:
                        await sent(delta)
        return reader.reply(sent.any)

    def failure(self, status: int, text: str, headers: httpx.Headers) -> ProviderError:
        """The error of an answer other than 200: ``ContextLengthExceeded`` for an input
        refused as too long, else a ``ProviderError``, retryable for 429 and 5xx, carrying
        the answer's ``Retry-After``."""
        refusal = self.refusal(status, text)
        message = f"provider {self.name!r} answered {status}: {refusal.detail}"
        if refusal.too_long:
            return ContextLengthExceeded(message, limit=refusal.limit, requested=refusal.requested)
        return ProviderError(
            message,
            status=status,
            retryable=status == 429 or status >= 500,
            retry_after=retry_after_seconds(headers.get("retry-after")),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def tool_arguments(raw: object) -> dict[str, Any]:
    """A tool call's arguments: an object, or the JSON text of one. Anything else goes back to
    the model as ``{"_unparsable_arguments": text}`` rather than being guessed at."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    text = raw if isinstance(raw, str) else json.dumps(raw)
    try:
        value = json.loads(text)
    except ValueError:
        return {"_unparsable_arguments": text}
    return value if isinstance(value, dict) else {"_unparsable_arguments": text}
