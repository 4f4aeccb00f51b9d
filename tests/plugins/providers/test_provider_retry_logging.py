"""A provider that is down says so while it retries: each retry is a log line with the
provider, the attempt, the wait and the error (the first at info, later ones at warning), and
giving up is a warning."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import trio

from soulacy.kernel.messages import Message, ModelReply
from soulacy.kernel.providers import ProviderError
from soulacy.plugins.providerkit import SentText, call_with_retries

SECRET = "sk-abcdefghij0123456789abcdefghij"


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "soulacy.providerkit"]


async def test_each_retry_is_logged_with_the_attempt_the_wait_and_the_error(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.abc.Clock
) -> None:
    failures = [
        ProviderError("provider 'local' answered 503: busy", status=503, retryable=True),
        ProviderError("provider 'local' answered 429: slow down", retryable=True, retry_after=7),
    ]

    async def attempt_once(sent: SentText) -> ModelReply:
        if failures:
            raise failures.pop(0)
        return ModelReply(Message("assistant", "at last"))

    caplog.set_level(logging.INFO, logger="soulacy")
    reply = await call_with_retries("local", 5, None, attempt_once)
    assert reply.message.content == "at last"
    first, second = retry_lines(caplog)
    assert first.levelno == logging.INFO
    assert first.getMessage() == (
        "provider 'local': attempt 1 of 6 failed, retrying in 0.5 s:"
        " provider 'local' answered 503: busy"
    )
    assert second.levelno == logging.WARNING  # still failing: worth a warning
    assert second.getMessage() == (
        "provider 'local': attempt 2 of 6 failed, retrying in 7 s:"  # as the provider asked
        " provider 'local' answered 429: slow down"
    )


async def test_giving_up_is_a_warning_the_error_redacted_and_a_refusal_left_to_the_run(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.abc.Clock
) -> None:
    async def refused(sent: SentText) -> ModelReply:
        raise ProviderError("provider 'p' answered 401: bad key", status=401)

    async def attempt_once(sent: SentText) -> ModelReply:
        raise ProviderError(f"provider 'p' answered 500: key {SECRET}\nat line 2", retryable=True)

    caplog.set_level(logging.INFO, logger="soulacy")
    with pytest.raises(ProviderError):
        await call_with_retries("p", 2, None, attempt_once)
    lines = retry_lines(caplog)
    assert [(r.levelno, r.getMessage().split(":")[1].strip()) for r in lines] == [
        (logging.INFO, "attempt 1 of 3 failed, retrying in 0.5 s"),
        (logging.WARNING, "attempt 2 of 3 failed, retrying in 1 s"),
        (logging.WARNING, "attempt 3 of 3 failed, giving up"),
    ]
    for record in lines:
        text = record.getMessage()
        assert SECRET not in text
        assert "\n" not in text
    caplog.clear()
    with pytest.raises(ProviderError):
        await call_with_retries("p", 5, None, refused)
    assert retry_lines(caplog) == []  # not retried: the run reports it (provider_error)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_soulacy_run_against_a_provider_that_is_down_says_so_at_log_level_info(
    tmp_path: Path, soulacy_cli: Any
) -> None:
    (tmp_path / "config.yaml").write_text(
        "llm:\n  providers:\n    local:\n      type: openai\n"
        f"      base_url: http://127.0.0.1:{closed_port()}/v1\n"
        "      model: tiny\n      max_retries: 2\n"
    )
    (tmp_path / "agents" / "a").mkdir(parents=True)
    (tmp_path / "agents" / "a" / "SOUL.yaml").write_text("llm: {provider: local}\n")
    done = soulacy_cli(["--log-level", "info", "run", "a", "hi"], cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if "soulacy.providerkit" in line]
    assert len(lines) == 3, done.stderr
    for n, line in enumerate(lines, 1):
        assert f"provider 'local': attempt {n} of 3 failed" in line, line
        assert "ConnectError" in line, line
    levels = [line.split(": ")[1] for line in lines]  # soulacy: LEVEL: logger: message
    assert levels == ["INFO", "WARNING", "WARNING"]
    assert "retrying in 0.5 s" in lines[0]
    assert "retrying in 1 s" in lines[1]
    assert "giving up" in lines[2]
