"""A schedule's run is owned through the lease ``schedule:ID``: held for the run's duration,
skipped while another live owner holds it, taken over once it expired (on any host), and a
stale owner's run is stopped and records nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool, open_kernel
from soulacy.kernel.store import LeaseOwner
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import Workspace, throwaway_plugin

KEY = "schedule:cron"
ELSEWHERE = LeaseOwner("kernel-elsewhere", 4242, "elsewhere")  # never provably gone from here


class Recorder(list[Event]):
    def __init__(self) -> None:
        super().__init__()
        self.changed = trio.Event()

    def add(self, event: Event) -> None:
        self.append(event)
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, type: str, count: int = 1) -> None:
        while sum(e.type == type for e in self) < count:
            await self.changed.wait()


class Slow:
    def __init__(self) -> None:
        self.started = trio.Event()
        self.exited = trio.Event()

    def plugin(self) -> Any:
        async def work() -> str:
            """Works for an hour."""
            self.started.set()
            try:
                await trio.sleep(3600)
                return "done"
            finally:
                self.exited.set()

        return throwaway_plugin(
            "slow", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(work)]
        )


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., tuple[Kernel, Recorder]]:
    def load(*plugins: Any) -> tuple[Kernel, Recorder]:
        events = Recorder()
        extra = [*plugins, throwaway_plugin("rec", soulacy_event=events.add)]
        kernel = make_kernel(extra_plugins=extra, plugins=["no:http", "no:sqlite_store"])
        return kernel, events

    return load


async def test_a_live_lease_elsewhere_skips_ticks_until_it_expires_then_is_taken_over(
    workspace: Workspace,
    load: Callable[..., tuple[Kernel, Recorder]],
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.scripted_agent("cron", [{"text": "ok"}], repeat=True, schedule={"cron": "* * * * *"})
    kernel, events = load()
    store = kernel.store()
    assert (await store.acquire_lease(KEY, ELSEWHERE, 3600, holder="schedule:cron:x")).acquired
    async with open_kernel(kernel=kernel):
        await events.until("schedule.skipped", 2)  # two ticks: the other host's run goes on
        skipped = [e.data["reason"] for e in events if e.type == "schedule.skipped"]
        assert set(skipped) == {"another process owns the schedule's run"}
        notes = await store.load_state(f"{KEY}:notes")
        assert notes is not None
        assert notes["recent"][-1]["owner"] == attrs.asdict(ELSEWHERE)
        assert not [e for e in events if e.type == "schedule.finished"]
        # That host stops renewing: with no time left, its lease has expired by the store's
        # clock, and the next tick takes the schedule over.
        assert (await store.acquire_lease(KEY, ELSEWHERE, 0, holder="schedule:cron:x")).acquired
        await events.until("schedule.finished")
        assert await store.get_lease(KEY) is None  # released once the run exited
    finished = [e for e in events if e.type == "schedule.finished"]
    assert finished[0].data["result"] == "succeeded"
    notes = await store.load_state(f"{KEY}:notes")
    assert notes is not None
    (takeover,) = [n for n in notes["recent"] if n["kind"] == "takeover"]
    assert takeover["previous_owner"] == attrs.asdict(ELSEWHERE)
    assert takeover["previous_lease"]["holder"] == "schedule:cron:x"


async def test_a_stale_owner_s_run_is_stopped_and_its_result_not_recorded(
    workspace: Workspace,
    load: Callable[..., tuple[Kernel, Recorder]],
    autojump_clock: trio.abc.Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workspace.write_config('runtime:\n  timeouts: {tool: "0", llm: "0", step: "0", run: "0"}\n')
    workspace.scripted_agent(
        "cron", [{"tool": "work"}], repeat=True, tools=["work"], schedule={"cron": "* * * * *"}
    )
    slow = Slow()
    kernel, events = load(slow.plugin())
    store = kernel.store()
    async with open_kernel(kernel=kernel):
        await slow.started.wait()
        await trio.sleep(600)  # ten minutes into the run: the lease is renewed all along
        lease = await store.get_lease(KEY)
        assert lease is not None
        assert (lease.owner, lease.expired) == (kernel.owner, False)
        ticks = [e for e in events if e.type == "schedule.skipped"]
        assert ticks  # the run still owns the schedule: the ticks meanwhile are skipped
        assert {e.data["reason"] for e in ticks} == {"the previous run is still executing"}
        # The owner stalls past its lease (the store's clock jumps an hour: no renewal came),
        # and another host takes the schedule over; nothing runs in between.
        now = time.time
        monkeypatch.setattr(MemoryStore, "_now", staticmethod(lambda: now() + 3600))
        taken = await store.acquire_lease(KEY, ELSEWHERE, 3600, holder="schedule:cron:y")
        assert taken.acquired
        assert taken.took_over_from is not None
        assert taken.took_over_from.owner == kernel.owner
        # The stale owner's next renewal finds the lease lost: its run is stopped.
        await slow.exited.wait()
        await events.until("schedule.finished")
    (finished,) = [e for e in events if e.type == "schedule.finished"]
    assert (finished.data["status"], finished.data["incomplete_reason"]) == (
        "cancelled",
        "lease_lost",
    )
    assert finished.data["result"] == "failed"
    assert "was lost" in finished.data["error"]
    state = await store.load_state(KEY)
    assert state is not None
    assert "last_result" not in state  # its write was refused: the schedule is the other's now
    current = await store.get_lease(KEY)
    assert current is not None
    assert current.owner == ELSEWHERE


async def test_the_listing_shows_the_lease_holder_and_whether_it_expired(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., Any],
) -> None:
    workspace.write_config("server:\n  enabled: false\n")
    workspace.scripted_agent("cron", [{"text": "ok"}], repeat=True, schedule={"cron": "0 7 * * *"})

    async def hold(ttl: float) -> None:
        kernel = make_kernel()  # the SQLite store of the workspace, as the command reads it
        try:
            grant = await kernel.store().acquire_lease(KEY, ELSEWHERE, ttl, holder="schedule:r")
            assert grant.acquired
        finally:
            await kernel.aclose()

    async def listing(*args: str) -> Any:
        done = await trio.to_thread.run_sync(
            lambda: soulacy_cli(["schedules", *args], cwd=workspace.path)
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    await hold(3600)
    (row,) = json.loads(await listing("--json"))
    owner = row["owner"]
    assert (owner["pid"], owner["host"], owner["holder"]) == (4242, "elsewhere", "schedule:r")
    assert owner["expired"] is False
    assert "running in pid 4242" in await listing()
    await hold(0)  # no heartbeat since: expired
    (row,) = json.loads(await listing("--json"))
    assert row["owner"]["expired"] is True
    assert "its lease expired" in await listing()
