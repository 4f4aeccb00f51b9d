"""Scheduled runs of a scripted agent: every tick plays the script from its start, a tick whose
script ran out is a failure, and every failed tick says so in the log, in one line."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, open_kernel
from soulacy.testing import Workspace, throwaway_plugin


class Finished:
    """The ``schedule.finished`` events, and a way to wait (in virtual time) for more."""

    def __init__(self, kernel: Kernel) -> None:
        self.events: list[dict[str, Any]] = []
        self._changed = trio.Event()
        kernel.pm.register(throwaway_plugin("finished", soulacy_event=self._add), name="finished")

    def _add(self, event: Event) -> None:
        if event.type == "schedule.finished":
            self.events.append(dict(event.data))
            self._changed.set()
            self._changed = trio.Event()

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        while len(self.events) < count:
            await self._changed.wait()
        return self.events


def load(make_kernel: Callable[..., Kernel]) -> Kernel:
    return make_kernel(plugins=["no:http", "no:sqlite_store"])


def scheduler_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "soulacy.scheduler"]


async def test_every_tick_plays_the_script_from_its_first_step(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.scripted_agent(
        "report",
        [{"text": "The report."}],  # one step, no repeat: enough for one run, each run
        schedule={"cron": "* * * * *", "output": "out/report.md"},
    )
    kernel = load(make_kernel)
    finished = Finished(kernel)
    async with open_kernel(kernel=kernel):
        first, second = (await finished.wait_for(2))[:2]
        assert (workspace.path / "out" / "report.md").read_text() == "The report."
        state = await kernel.store().load_state("schedule:report")
    for outcome in (first, second):
        assert (outcome["status"], outcome["result"]) == ("completed", "succeeded"), outcome
    assert first["run_id"] != second["run_id"]
    assert state is not None
    assert state["failure_streak"] == 0


async def test_a_tick_whose_script_ran_out_fails_and_is_logged_in_one_line(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.abc.Clock,
) -> None:
    # The model asks for a tool, then has nothing more to say: the run cannot end well.
    workspace.scripted_agent(
        "short", [{"tool": "missing"}], schedule={"cron": "* * * * *", "output": "out.md"}
    )
    caplog.set_level(logging.INFO, logger="soulacy")
    kernel = load(make_kernel)
    finished = Finished(kernel)
    async with open_kernel(kernel=kernel):
        (outcome,) = await finished.wait_for(1)
        state = await kernel.store().load_state("schedule:short")
    assert (outcome["status"], outcome["incomplete_reason"]) == ("failed", "provider_error")
    assert outcome["result"] == "failed"
    assert "agents/short/script.yaml has ended" in outcome["error"]
    assert state is not None
    assert state["failure_streak"] == 1
    assert not (workspace.path / "out.md").exists()  # nothing delivered
    (line,) = [r for r in scheduler_lines(caplog) if r.levelno == logging.WARNING]
    text = line.getMessage()
    assert "\n" not in text
    for said in (
        "schedule 'short'",
        "agent 'short'",
        f"run {outcome['run_id']}",
        "status failed",
        "reason provider_error",
        "agents/short/script.yaml has ended",  # the error, so that the line says why
        "failure streak 1",
    ):
        assert said in text, text


async def test_a_schedule_that_keeps_failing_logs_each_failure_and_when_it_is_disabled(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.write_config("scheduler:\n  max_failures: 2\n  backoff: [1m]\n")
    workspace.scripted_agent(
        "flaky", [{"tool": "nope"}], repeat=True, max_turns=1, schedule={"cron": "* * * * *"}
    )
    caplog.set_level(logging.INFO, logger="soulacy")
    kernel = load(make_kernel)
    finished = Finished(kernel)
    async with open_kernel(kernel=kernel):
        outcomes = await finished.wait_for(2)
    warnings = [r.getMessage() for r in scheduler_lines(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    for outcome, text in zip(outcomes, warnings, strict=True):
        assert f"run {outcome['run_id']}" in text
        assert f"status {outcome['status']}" in text
        assert f"reason {outcome['incomplete_reason']}" in text
    assert "disabled" not in warnings[0]
    assert "disabled after 2 failures in a row" in warnings[1]


async def test_a_succeeded_tick_is_logged_at_info(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.scripted_agent("ok", [{"text": "Done."}], schedule={"cron": "* * * * *"})
    caplog.set_level(logging.INFO, logger="soulacy")
    kernel = load(make_kernel)
    finished = Finished(kernel)
    async with open_kernel(kernel=kernel):
        (outcome,) = (await finished.wait_for(1))[:1]
    (line,) = [r for r in scheduler_lines(caplog) if r.levelno == logging.INFO][:1]
    text = line.getMessage()
    assert "schedule 'ok'" in text
    assert f"run {outcome['run_id']}" in text
    assert "succeeded" in text
