"""The scheduler with Trio's MockClock: ownership until execution exits, failures, backoff."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool, open_kernel
from soulacy.testing import Workspace, throwaway_plugin

NO_DEADLINES = 'runtime:\n  timeouts: {tool: "0", llm: "0", step: "0", run: "0", http: "0"}\n'


class Slow:
    """A tool that takes ``seconds`` and, when cancelled, ``cleanup`` more to really exit."""

    def __init__(self) -> None:
        self.started = 0
        self.started_at: list[float] = []
        self.exited_at: list[float] = []

    def plugin(self, seconds: float, cleanup: float = 0) -> Any:
        async def work() -> str:
            """Works for a long time."""
            self.started += 1
            self.started_at.append(trio.current_time())
            try:
                await trio.sleep(seconds)
                return "done"
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(cleanup)
                self.exited_at.append(trio.current_time())

        return throwaway_plugin(
            "slow", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(work)]
        )


def scheduled(
    workspace: Workspace,
    schedule: dict[str, Any],
    steps: list[dict[str, Any]],
    tools: tuple[str, ...] = (),
    **keys: Any,
) -> None:
    workspace.scripted_agent(
        "cron", steps, repeat=True, tools=list(tools), schedule=schedule, **keys
    )


class Recorder(list[Event]):
    """The kernel's events, and a way to wait for scheduled runs to finish."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = trio.Event()

    def add(self, event: Event) -> None:
        self.append(event)
        self.changed.set()
        self.changed = trio.Event()


async def finished(events: Recorder, count: int) -> None:
    """Wait (in virtual time) until ``count`` scheduled runs have finished."""
    while sum(e.type == "schedule.finished" for e in events) < count:
        await events.changed.wait()


def recorder(kernel: Kernel) -> Recorder:
    seen = Recorder()
    kernel.pm.register(throwaway_plugin("rec", soulacy_event=seen.add), name="rec")
    return seen


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    def load(*plugins: Any) -> Kernel:
        return make_kernel(extra_plugins=list(plugins), plugins=["no:http", "no:sqlite_store"])

    return load


async def test_a_two_hour_run_on_a_one_minute_cron_never_overlaps(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config(NO_DEADLINES)
    scheduled(workspace, {"cron": "* * * * *"}, [{"tool": "work"}, {"text": "ok"}], ("work",))
    slow = Slow()
    kernel = load(slow.plugin(2 * 3600))
    events = recorder(kernel)
    async with open_kernel(kernel=kernel):
        await trio.sleep(2 * 3600 + 150)  # past the first run's end, into the next run
    skipped = [e for e in events if e.type == "schedule.skipped"]
    assert slow.started == 2  # the first tick after the first run ended started the next
    first_end = slow.exited_at[0]
    assert first_end - slow.started_at[0] == pytest.approx(2 * 3600)
    assert slow.started_at[1] >= first_end  # one execution at a time, never overlapping
    assert len(skipped) >= 110  # the ticks of those two hours, each recorded with its reason
    assert {e.data["reason"] for e in skipped} == {"the previous run is still executing"}
    finished = [e for e in events if e.type == "schedule.finished"]
    assert finished[0].data["result"] == "succeeded"


async def test_a_run_cancelled_by_its_timeout_owns_the_schedule_until_it_exits(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config(NO_DEADLINES)
    scheduled(workspace, {"cron": "* * * * *", "timeout": "10m"}, [{"tool": "work"}], ("work",))
    slow = Slow()
    kernel = load(slow.plugin(3600, cleanup=150))  # 2.5 minutes to stop after the deadline
    events = recorder(kernel)
    async with open_kernel(kernel=kernel):
        store = kernel.store()
        first_tick = min(60 - trio.current_time() % 60, 60)
        await trio.sleep(first_tick + 600 + 60)  # deadline passed, cleanup still going
        lease = await store.get_lease("schedule:cron")
        assert lease is not None
        assert (lease.owner, lease.expired) == (kernel.owner, False)  # renewed all along
        assert lease.holder.startswith("schedule:cron:")  # the run id of the tick
        assert slow.started == 1
        await trio.sleep(120)  # the run has exited now
        assert slow.exited_at
    finished = [e for e in events if e.type == "schedule.finished"]
    assert finished[0].data["status"] == "incomplete"
    assert finished[0].data["incomplete_reason"] == "schedule_timeout"
    assert finished[0].data["result"] == "failed"
    # No tick started a run while the first was still exiting after its deadline.
    assert all(start >= slow.exited_at[0] for start in slow.started_at[1:])


async def test_an_incomplete_run_is_a_failure_not_a_completion(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    scheduled(workspace, {"cron": "* * * * *"}, [{"tool": "nope"}], max_turns=1)
    kernel = load()
    events = recorder(kernel)
    async with open_kernel(kernel=kernel):
        await finished(events, 1)
        state = await kernel.store().load_state("schedule:cron")
    assert state is not None
    assert state["last_result"]["result"] == "failed"
    assert state["last_result"]["incomplete_reason"] == "max_turns", state
    assert state["failure_streak"] == 1
    assert not [
        e for e in events if e.type == "schedule.finished" and e.data["result"] == "succeeded"
    ]


async def test_failures_back_off_and_disable_the_schedule(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config("scheduler:\n  max_failures: 3\n  backoff: [2m, 5m]\n")
    scheduled(workspace, {"cron": "* * * * *"}, [{"tool": "nope"}], max_turns=1)
    kernel = load()
    events = recorder(kernel)
    async with open_kernel(kernel=kernel):
        await trio.sleep(3600)
        state = await kernel.store().load_state("schedule:cron")
    finished = [e for e in events if e.type == "schedule.finished"]
    assert len(finished) == 3
    assert [e.type for e in events].count("schedule.disabled") == 1
    assert state is not None
    assert state["disabled"] is True
    reasons = {e.data["reason"] for e in events if e.type == "schedule.skipped"}
    assert reasons == {"backing off after a failure"}


async def test_a_completed_run_writes_its_output_and_a_failed_delivery_is_a_failure(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    scheduled(workspace, {"cron": "* * * * *", "output": "out/report.md"}, [{"text": "the report"}])
    (workspace.path / "out").mkdir()
    kernel = load()
    events = recorder(kernel)
    async with open_kernel(kernel=kernel):
        await finished(events, 1)
        assert (workspace.path / "out" / "report.md").read_text() == "the report"
        (workspace.path / "out" / "report.md").unlink()
        (workspace.path / "out" / "report.md").mkdir()  # now the write must fail
        await finished(events, 2)
        state = await kernel.store().load_state("schedule:cron")
    assert state is not None
    assert state["last_result"]["status"] == "completed"  # the run itself completed…
    assert state["last_result"]["result"] == "failed"  # …but the schedule did not
    assert "delivery to 'out/report.md' failed" in state["last_result"]["error"]


async def test_missed_runs_at_start_up_follow_the_window(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    from datetime import datetime

    scheduled(
        workspace,
        {"cron": "0 * * * *", "run_missed_on_startup": True, "missed_startup_window": "24h"},
        [{"text": "caught up"}],
    )

    async def start_after(last_tick: str) -> list[Event]:
        kernel = load()
        await kernel.store().save_state("schedule:cron", {"last_tick": last_tick})
        events = recorder(kernel)
        async with open_kernel(kernel=kernel):
            await trio.sleep(1)
        return events

    # Down for years: the ticks of the last 24 hours were missed; one catch-up run, not many.
    events = await start_after("2000-01-01T00:00:00+00:00")
    assert [e.type for e in events].count("schedule.missed") == 1
    assert [e.data["result"] for e in events if e.type == "schedule.finished"] == ["succeeded"]
    # Nothing was due since the last tick: no catch-up.
    latest = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    events = await start_after(latest.isoformat())
    assert not [e for e in events if e.type == "schedule.missed"]


def test_a_bad_cron_expression_is_a_config_error(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    from soulacy.kernel import ConfigError

    scheduled(workspace, {"cron": "61 * * * *"}, [{"text": "x"}])
    with pytest.raises(ConfigError, match=r"schedule\.cron: invalid cron expression"):
        load().agent("cron")


def test_scheduled_agents_inherit_the_workspace_policy(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    scheduled(workspace, {"cron": "* * * * *"}, [{"text": "x"}])
    policy = load().resolve_policy("cron")
    assert policy.max_turns.value == 256
    assert policy.max_turns.source == "default"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("scheduler:\n  backoff: []\n", "scheduler.backoff: expected at least one duration"),
        ("scheduler:\n  max_failures: -1\n", "scheduler.max_failures: expected 0"),
        ("scheduler:\n  timezone: Mars/Olympus\n", "scheduler.timezone: unknown time zone"),
    ],
)
def test_scheduler_settings_are_validated(
    workspace: Workspace, load: Callable[..., Kernel], config: str, message: str
) -> None:
    from soulacy.kernel import ConfigError

    workspace.write_config(config)
    with pytest.raises(ConfigError, match=message):
        load()
