"""Retrying a model call: backoff, ``Retry-After``, and no retry once text was shown."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime

import trio

from soulacy.kernel import UsageError, redact_text
from soulacy.kernel.messages import ModelReply
from soulacy.kernel.providers import (
    ContextLengthExceeded,
    ProviderConfig,
    ProviderError,
    TextSink,
)

MAX_BACKOFF = 60.0  # seconds: the longest wait between two attempts of a model call
log = logging.getLogger("soulacy.providerkit")


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds, given as seconds or as an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.datetime.now(when.tzinfo)).total_seconds())


def backoff_delay(failure: ProviderError, attempt: int) -> float:
    """How long to wait before retrying: what the provider asked for, else exponential."""
    if failure.retry_after is not None:
        return min(failure.retry_after, MAX_BACKOFF)
    return min(0.5 * 2.0**attempt, MAX_BACKOFF)


class SentText:
    """Passes streamed text on to a sink, remembering whether any reached it: text already
    shown cannot be taken back, so a stream that fails after it must not be retried."""

    def __init__(self, sink: TextSink | None) -> None:
        self.sink = sink
        self.any = False

    async def __call__(self, delta: str) -> None:
        if self.sink is not None:  # without a sink nothing was shown: a retry is still fine
            self.any = True
            await self.sink(delta)


async def call_with_retries(
    name: str,
    max_retries: int,
    on_text: TextSink | None,
    attempt_once: Callable[[SentText], Awaitable[ModelReply]],
) -> ModelReply:
    """Runs ``attempt_once`` until it answers, retrying retryable ``ProviderError``s and
    dropped connections with ``backoff_delay`` up to ``max_retries`` times. Streamed text goes
    through one ``SentText``: once any reached the sink, a dropped connection is final.

    Each retry is logged on ``soulacy.providerkit`` (the first at info, later ones at warning)
    with the provider, the attempt, the wait and the error; giving up after retrying is a
    warning too (docs/providers.md, "Retries"). An error that is not retried is left to the
    run, which reports it (``provider_error``)."""
    sent = SentText(on_text)
    import httpx  # loaded by the first call, not by importing the toolkit

    attempt = 0
    while True:
        try:
            return await attempt_once(sent)
        except ContextLengthExceeded:
            raise
        except ProviderError as exc:
            failure = exc
        except httpx.TransportError as exc:
            failure = ProviderError(
                f"provider {name!r}: {type(exc).__name__}: {exc}",
                # Text already shown cannot be taken back: no retry after the first delta.
                retryable=not sent.any,
            )
        if not failure.retryable or attempt >= max_retries:
            if failure.retryable and attempt:  # it was retried: say that it stops
                log.warning(
                    "provider %r: attempt %d of %d failed, giving up: %s",
                    name,
                    attempt + 1,
                    max_retries + 1,
                    _one_line(name, failure),
                )
            raise failure
        wait = backoff_delay(failure, attempt)
        log.log(
            logging.INFO if attempt == 0 else logging.WARNING,
            "provider %r: attempt %d of %d failed, retrying in %s s: %s",
            name,
            attempt + 1,
            max_retries + 1,
            f"{round(wait, 3):g}",
            _one_line(name, failure),
        )
        await trio.sleep(wait)
        attempt += 1


def _one_line(name: str, failure: ProviderError) -> str:
    """The error as a log line about provider ``name`` says it: one line, secrets redacted,
    without the provider's name again in front."""
    text = " ".join(str(failure).split()).removeprefix(f"provider {name!r}: ")
    return redact_text(text)


def api_key(name: str, config: ProviderConfig, environ: Mapping[str, str]) -> str | None:
    """The key of provider ``name``: ``api_key``, else the ``api_key_env`` variable (an error
    naming the setting when it is not set), else None (a local server may need none)."""
    if config.api_key is not None or not config.api_key_env:
        return config.api_key
    key = environ.get(config.api_key_env)
    if key is None:
        raise UsageError(
            f"llm.providers.{name}.api_key_env: the environment variable"
            f" {config.api_key_env} is not set"
        )
    return key
