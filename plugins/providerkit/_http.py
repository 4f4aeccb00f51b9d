"""A provider for a JSON-over-HTTP model API: its client, retries, errors and event streams."""

from __future__ import annotations

import abc
import json
import math
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


_JSON = {"Content-Type": "application/json"}


def _request_json(name: str, body: Mapping[str, Any]) -> bytes:
    """The body as httpx would encode it, but never with ``NaN`` or ``Infinity`` in it."""
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        found = ", ".join(_not_finite(dict(body))) or str(exc)
        raise ProviderError(
            f"provider {name!r}: the request is not valid JSON, not a finite number at {found}"
        ) from exc
    return text.encode("utf-8")


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
        """POST ``body`` to ``path`` and return the reply, retrying as the class says. A body
        that is not valid JSON (a number that is not finite) is an error, and is not sent."""
        content = _request_json(self.name, body)

        async def attempt_once(sent: SentText) -> ModelReply:
            if stream:
                return await self._stream(content, sent)
            response = await self._client.post(self.path, content=content, headers=_JSON)
            if response.status_code == 200:
                return self.parse_reply(response.json())
            raise self.failure(response.status_code, response.text, response.headers)

        return await call_with_retries(self.name, self.config.max_retries, on_text, attempt_once)

    async def _stream(self, content: bytes, sent: SentText) -> ModelReply:
        reader = self.stream_reader()
        async with self._client.stream(
            "POST", self.path, content=content, headers=_JSON
        ) as response:
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


class _NotFinite:
    """A number JSON cannot carry, as the model wrote it (``1e999``, ``NaN``, ``Infinity``)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _finite_or_marked(literal: str) -> float | _NotFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NotFinite(literal)


def _not_finite(value: object, where: str = "") -> list[str]:
    """``path: literal`` of every number in ``value`` that is not finite, in document order."""
    if isinstance(value, _NotFinite):
        return [f"{where}: {value.literal}"]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{where}: {value!r}"]
    if isinstance(value, dict):
        return [
            found
            for key, item in value.items()
            for found in _not_finite(item, f"{where}.{key}" if where else str(key))
        ]
    if isinstance(value, (list, tuple)):
        return [
            found for n, item in enumerate(value) for found in _not_finite(item, f"{where}[{n}]")
        ]
    return []


def tool_arguments(raw: object) -> dict[str, Any]:
    """A tool call's arguments: an object, or the JSON text of one. Anything else goes back to
    the model as ``{"_unparsable_arguments": text}`` rather than being guessed at.

    A number that is not finite (``1e999`` overflows a double; ``NaN`` and ``Infinity`` are
    not JSON although Python reads them) becomes ``{"_not_a_finite_number": "path: literal,
    ..."}``: the tool rejects that as an argument error the model sees, and the call, kept in
    the history, can still be sent as JSON (a server such as llama.cpp's refuses ``Infinity``).
    """
    if isinstance(raw, dict):
        value: object = raw
    elif raw is None or raw == "":
        return {}
    else:
        try:
            text = raw if isinstance(raw, str) else json_text(raw)
        except ValueError:  # a non-finite number in a list of arguments: not an object anyway
            return {"_unparsable_arguments": repr(raw)}
        try:
            value = json.loads(text, parse_float=_finite_or_marked, parse_constant=_NotFinite)
        except ValueError:
            return {"_unparsable_arguments": text}
        if not isinstance(value, dict):
            return {"_unparsable_arguments": text}
    found = _not_finite(value)
    if found:
        return {"_not_a_finite_number": ", ".join(found)}
    return cast("dict[str, Any]", value)


def json_text(value: Any) -> str:
    """``value`` as JSON text; a number that is not finite is a ``ValueError`` (JSON has no
    infinity or NaN: ``json.dumps`` would write ``Infinity``, which servers refuse)."""
    return json.dumps(value, allow_nan=False)
