"""Every service ends on its own when the kernel stops (``check_service_stops``): the builtin and
contrib ones, each with real work configured (an HTTP port, a schedule, an MCP server process,
the metrics endpoint), and a planted one that waits to be cancelled instead."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace, check_service_stops, throwaway_plugin

MCP_SERVER = Path(__file__).parents[1] / "plugins" / "mcp" / "mcp_server.py"
EVERY_SERVICE = ("approvals", "http", "mcp", "otel-metrics", "retention", "scheduler")


def configure_every_service(workspace: Workspace) -> None:
    mcp = {"command": sys.executable, "args": [str(MCP_SERVER)], "backoff": ["100ms"]}
    config = {
        "plugins": {"enable": ["soulacy.contrib.otel"]},
        "server": {"port": 0},
        "otel": {"exporter": "none", "metrics_bind": "127.0.0.1:0"},
        "mcp": {"servers": {"docs": mcp}},
    }
    workspace.write_config(json.dumps(config))
    workspace.scripted_agent("cron", [{"text": "ok"}], schedule={"cron": "0 3 * * *"})


def builtin_services(make_kernel: Callable[..., Kernel]) -> list[str]:
    return sorted(s.name for s in make_kernel().services())


def test_every_builtin_and_contrib_service_is_configured_here(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    configure_every_service(workspace)
    assert tuple(builtin_services(make_kernel)) == EVERY_SERVICE


@pytest.mark.parametrize("name", EVERY_SERVICE)
async def test_the_service_returns_by_itself_once_the_kernel_is_stopping(
    name: str, workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    configure_every_service(workspace)
    kernel = make_kernel()
    try:
        (service,) = [s for s in kernel.services() if s.name == name]
        await check_service_stops(kernel, service)
    finally:
        await kernel.aclose()


class WaitsToBeCancelled:
    """The planted bug: serve() ignores kernel.stopping and sleeps until it is cancelled."""

    name = "sleeper"

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep_forever()


class StopsWhenAsked:
    name = "polite"

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started("ready")
        await self.kernel.stopping.wait()


async def test_the_check_fails_a_service_that_waits_to_be_cancelled(kernel: Kernel) -> None:
    with pytest.raises(AssertionError) as info:
        await check_service_stops(kernel, WaitsToBeCancelled(), within=0.05)
    message = str(info.value)
    assert message.startswith("service sleeper: after kernel.stopping was set")
    assert "expected serve() to return within 0.05s" in message


async def test_the_check_passes_a_service_that_awaits_kernel_stopping(kernel: Kernel) -> None:
    assert await check_service_stops(kernel, StopsWhenAsked(kernel)) == "ready"


async def test_the_check_needs_a_kernel_that_is_not_stopping(kernel: Kernel) -> None:
    kernel.stopping.set()
    with pytest.raises(ValueError, match="not stopping yet"):
        await check_service_stops(kernel, StopsWhenAsked(kernel))


async def test_open_kernel_with_the_builtin_plugins_stops_without_its_grace_period(
    make_kernel: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The default grace period is 5 s of virtual time here: leaving the block takes none of it
    when every service ends on kernel.stopping."""
    async with open_kernel(kernel=make_kernel()):
        entered = trio.current_time()
    assert trio.current_time() - entered < 1.0
    assert "did not stop" not in caplog.text


async def test_a_service_cancelled_by_the_grace_period_is_named_in_a_warning(
    make_kernel: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sleeper = throwaway_plugin("sleeper", soulacy_services=lambda kernel: [WaitsToBeCancelled()])
    kernel = make_kernel(extra_plugins=[sleeper], plugins=["no:http"])
    with caplog.at_level(logging.WARNING, logger="soulacy.kernel"):
        async with open_kernel(kernel=kernel, grace_period=3):
            entered = trio.current_time()
    assert trio.current_time() - entered == pytest.approx(3)
    assert "service 'sleeper' did not stop when the kernel stopped" in caplog.text
