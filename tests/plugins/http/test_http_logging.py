"""A run that fails in the HTTP plugin's run task is logged, redacted, never swallowed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from _support.http_server import Server

from soulacy.kernel import Kernel
from soulacy.plugins.http import run_logs

SECRET = "abcdefghij0123456789"


async def test_a_run_task_that_fails_logs_the_error(
    server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"the proxy refused Authorization: Bearer {SECRET}")

    monkeypatch.setattr(server.kernel.runner(), "run", broken)  # the run task fails
    caplog.set_level(logging.ERROR, logger="soulacy")
    async with server.client() as client:
        response = await client.post("/chat", json={"agent_id": "echo", "text": "x"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "failed"
    (record,) = [r for r in caplog.records if r.name == "soulacy.http"]
    assert record.levelno == logging.ERROR
    text = record.getMessage()
    assert "RuntimeError: the proxy refused" in text
    assert "Traceback" in text  # the trace, not only the message
    assert SECRET not in text  # redacted as every error text is
    assert response.json()["run_id"] in text


def test_each_kernel_keeps_its_own_run_logs(make_kernel: Callable[..., Kernel]) -> None:
    one, two = make_kernel(), make_kernel()
    assert run_logs(one) is run_logs(one)
    assert run_logs(one) is not run_logs(two)
