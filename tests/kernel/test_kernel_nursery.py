"""The kernel's nursery (decision 0062): while a kernel is open, its background work runs in
the kernel's own nursery, is waited for when the kernel stops and says when it fails; shipped
code starts nothing outside a nursery and uses no private name of pluggy, argparse or Trio."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from soulacy.kernel import Kernel, UsageError, open_kernel
from soulacy.testing import Workspace

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("kernel", "plugins", "contrib", "sdk", "testing")
# Private names of the stack's libraries that shipped code once used, and the Trio calls that
# start work outside any nursery or hook into the scheduler.
FORBIDDEN = re.compile(
    r"spawn_system_task|trio\.abc\.Instrument|add_instrument|(?<!\w)(_hookexec|_hookimpls|"
    r"_inner_hookexec|_multicall|_name_parser_map|_choices_actions|_ChoicesPseudoAction|"
    r"_prog_prefix)(?!\w)"
)


def test_shipped_code_uses_no_private_names_and_no_system_tasks() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in SHIPPED
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line.split("#", 1)[0])
    ]
    assert found == []


async def test_background_work_runs_while_open_and_is_cancelled_once_it_stops(
    make_kernel: Callable[..., Kernel],
) -> None:
    kernel = make_kernel()
    assert not kernel.is_open
    assert not kernel.start_soon(trio.sleep_forever)  # no nursery: the caller does it itself
    started, ended = trio.Event(), trio.Event()

    async def work() -> None:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            ended.set()

    async with open_kernel(kernel=kernel, services="runs"):
        assert kernel.is_open
        assert kernel.start_soon(work, name="work")
        await started.wait()
        assert not ended.is_set()
    assert ended.is_set()  # open_kernel returned after the work was cancelled and ended
    assert not kernel.is_open


async def test_an_error_of_background_work_comes_out_of_open_kernel(
    make_kernel: Callable[..., Kernel],
) -> None:
    kernel = make_kernel()

    async def broken() -> None:
        raise RuntimeError("the keeper broke")

    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="the keeper broke")):
        async with open_kernel(kernel=kernel, services="runs"):
            kernel.start_soon(broken)
            await trio.sleep_forever()  # cancelled by the failure


async def test_a_kernel_opens_once_at_a_time(make_kernel: Callable[..., Kernel]) -> None:
    kernel = make_kernel()
    async with open_kernel(kernel=kernel, services="runs"):
        with pytest.raises(UsageError, match="open already"):
            async with open_kernel(kernel=kernel, services="runs"):
                pass


async def test_runs_of_an_open_kernel_share_one_lease_keeper_and_a_closed_one_renews_nothing(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel()
    async with open_kernel(kernel=kernel, services="runs"):
        first = kernel.leases
        assert (await kernel.run("a", "go")).status == "completed"
        assert (await kernel.run("a", "go")).status == "completed"
        assert kernel.leases is first  # one keeper for every run and plugin of the kernel
    # Not open: a run has its own, in its own nursery; outside a run nothing is renewed.
    assert (await kernel.run("a", "go")).status == "completed"
    assert kernel.leases is not first
    await kernel.aclose()
