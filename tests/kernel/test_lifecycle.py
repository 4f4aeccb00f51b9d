"""open_kernel runs plugin services in the kernel's nursery and stops them gracefully."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

from soulacy.kernel import Event, Kernel, hookimpl, open_kernel
from soulacy.testing import Workspace, throwaway_plugin


@attrs.define
class SlowStarter:
    """A service that takes a while to get ready, then waits for the kernel to stop."""

    name: str = "slow"
    kernel: Kernel | None = None
    ready: bool = False
    drained: bool = False
    cancelled: bool = False
    obey_stop: bool = True

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await trio.sleep(0.5)
        self.ready = True
        task_status.started("ready-token")
        try:
            if self.obey_stop:
                assert self.kernel is not None
                await self.kernel.stopping.wait()
                self.drained = True
            else:
                await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled = True
            raise


def service_plugin(service: SlowStarter) -> Any:
    def soulacy_services(kernel: Kernel) -> list[SlowStarter]:
        service.kernel = kernel
        return [service]

    return throwaway_plugin("services", soulacy_services=soulacy_services)


async def test_services_are_ready_when_the_block_begins(
    make_kernel: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    service = SlowStarter()
    kernel = make_kernel(extra_plugins=[service_plugin(service)], plugins=["no:http"])
    async with open_kernel(kernel=kernel):
        assert service.ready
        assert kernel.started == {"slow": "ready-token"}
    assert service.drained
    assert not service.cancelled


async def test_a_service_that_ignores_the_stop_is_cancelled_after_the_grace_period(
    make_kernel: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    service = SlowStarter(obey_stop=False)
    kernel = make_kernel(extra_plugins=[service_plugin(service)], plugins=["no:http"])
    async with open_kernel(kernel=kernel, grace_period=7):
        pass
    stopped_at = trio.current_time()
    assert service.cancelled
    assert stopped_at == pytest.approx(0.5 + 7)


async def test_events_reach_observers_then_subscribers_in_order(
    make_kernel: Callable[..., Kernel],
) -> None:
    seen: list[str] = []

    class Observer:
        name = "observer"

        @hookimpl
        async def soulacy_event(self, event: Event) -> None:  # awaited by the kernel
            await trio.lowlevel.checkpoint()
            seen.append(event.type)

    kernel = make_kernel(extra_plugins=[Observer()])
    receive = kernel.events.subscribe()
    await kernel.events.emit("run.started", {"n": 1}, run_id="r1")
    await kernel.events.emit("run.completed", run_id="r1")
    first, second = receive.receive_nowait(), receive.receive_nowait()
    assert (first.type, first.seq, first.data) == ("run.started", 1, {"n": 1})
    assert (second.type, second.seq) == ("run.completed", 2)
    assert seen == ["run.started", "run.completed"]


async def test_a_subscriber_that_lags_is_dropped_instead_of_growing_memory(
    kernel: Kernel,
) -> None:
    slow = kernel.events.subscribe(buffer=2)
    fast = kernel.events.subscribe(buffer=100)
    for i in range(5):
        await kernel.events.emit("tick", {"i": i})
    assert [slow.receive_nowait().data["i"] for _ in range(2)] == [0, 1]
    with pytest.raises(trio.EndOfChannel):
        await slow.receive()
    assert len([fast.receive_nowait() for _ in range(5)]) == 5
    assert kernel.events.statistics() == {"subscribers": 1}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_serve_stops_cleanly_on_a_signal(workspace: Workspace, signum: int) -> None:
    workspace.write_config("server:\n  port: 0\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    line = proc.stderr.readline()
    while line and "soulacy: serving" not in line:  # printed once every service is ready
        line = proc.stderr.readline()
    try:
        assert "soulacy: serving" in line
        assert "http" in line.partition("(services: ")[2].partition(")")[0].split(", ")
    finally:
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert f"{signal.Signals(signum).name} received, shutting down" in err
    assert "soulacy: stopped in" in err.splitlines()[-1]  # it says so once it has stopped
    assert "did not stop" not in err  # no service waited out the grace period
