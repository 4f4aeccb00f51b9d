"""A scheduled run that raises is recorded as a failure and logged, never swallowed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, open_kernel
from soulacy.testing import Workspace, throwaway_plugin

SECRET = "abcdefghij0123456789"


async def test_a_run_that_raises_is_logged_and_recorded_as_failed(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.scripted_agent("cron", [{"text": "ok"}], repeat=True, schedule={"cron": "* * * * *"})
    done = trio.Event()

    def seen(event: Event) -> None:
        if event.type == "schedule.finished":
            done.set()

    kernel = make_kernel(
        plugins=["no:http", "no:sqlite_store"],
        extra_plugins=[throwaway_plugin("seen", soulacy_event=seen)],
    )

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"refused: Authorization: Bearer {SECRET}")

    monkeypatch.setattr(kernel, "run", broken)
    caplog.set_level(logging.ERROR, logger="soulacy")
    async with open_kernel(kernel=kernel):
        await done.wait()
        state = await kernel.store().load_state("schedule:cron")
    assert state is not None
    assert state["last_result"]["result"] == "failed"
    (record,) = [r for r in caplog.records if r.name == "soulacy.scheduler"]
    assert record.levelno == logging.ERROR
    text = record.getMessage()
    assert "'cron'" in text
    assert "RuntimeError: refused" in text
    assert "Traceback" in text
    assert SECRET not in text
