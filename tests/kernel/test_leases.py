"""kernel.leases and the cancel watcher: two kernels on one SQLite workspace are two owners."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from soulacy.kernel import ConfigError, Kernel, open_kernel
from soulacy.kernel.store import ConversationKey, LeaseLost
from soulacy.testing import Workspace

FAST = "leases: {ttl: 300ms, heartbeat: 50ms, cancel_poll: 50ms}\n"


def slow_agent(workspace: Workspace) -> None:
    workspace.write_config(FAST)
    workspace.scripted_agent(
        "a",
        [{"tool": "wait", "arguments": {}, "id": "w"}, {"text": "done"}],
        tools=["tools.py:wait"],
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        "import time\n\n\ndef wait() -> str:\n"
        '    """Takes a while."""\n    time.sleep(30)\n    return "waited"\n'
    )


async def started(kernel: Kernel, run_id: str) -> None:
    """Until the run, started by another kernel, is in the store (no event crosses kernels)."""
    with trio.fail_after(20):
        while (await kernel.store().get_run(run_id)) is None:  # noqa: ASYNC110
            await trio.sleep(0.02)


async def test_a_heartbeat_keeps_a_lease_past_its_ttl_and_a_release_frees_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(FAST)
    one, two = make_kernel(), make_kernel()
    async with open_kernel(kernel=one, services="runs"):  # its nursery renews the lease
        held = await one.leases.acquire("k", holder="x")
        assert held is not None
        await trio.sleep(0.6)  # two ttls: only the heartbeat keeps it
        assert await two.leases.acquire("k", holder="y", wait=False) is None
        await one.leases.release(held)
    taken = await two.leases.acquire("k", holder="y", wait=False)
    assert taken is not None
    assert taken.lease.token > held.lease.token
    await two.leases.release(taken)
    await two.aclose()


async def test_outside_an_open_kernel_and_its_runs_a_lease_is_not_renewed(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """An operator command's kernel is not open: its leases are taken and given back, not
    renewed (nothing runs in the background of a kernel that is not open); a hold longer
    than the ttl lapses, and fencing keeps it from writing after that."""
    workspace.write_config(FAST)
    one, two = make_kernel(), make_kernel()
    held = await one.leases.acquire("k", holder="x")
    assert held is not None
    await trio.sleep(0.6)  # two ttls, and no heartbeat
    taken = await two.leases.acquire("k", holder="y", wait=False)
    assert taken is not None
    await two.leases.release(taken)
    await one.aclose()
    await two.aclose()


async def test_hold_cancels_its_block_and_raises_lease_lost_when_taken_over(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(FAST)
    one, two = make_kernel(), make_kernel()
    store = two.store()
    reached_end = False

    async def holding() -> None:
        nonlocal reached_end
        async with one.leases.hold("k", holder="x") as held:
            # Another owner takes the lease over behind the holder's back: it "expired".
            await store.release_lease(held.lease)
            assert (await store.acquire_lease("k", two.owner, 30.0, holder="y")).acquired
            await trio.sleep(5)  # cancelled at the next heartbeat
            reached_end = True

    async with open_kernel(kernel=one, services="runs"):
        with trio.fail_after(3), pytest.raises(LeaseLost):
            await holding()
    assert not reached_end
    await two.aclose()


async def test_a_cancel_by_conversation_from_another_kernel_stops_the_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    slow_agent(workspace)
    runner, other = make_kernel(), make_kernel()
    results = []

    async def run() -> None:
        results.append(await runner.run("a", "go", session_id="S", run_id="R"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await started(other, "R")
        key = ConversationKey("a", "S")
        assert (
            await other.runner().request_cancel_conversation(key, "stop, please") == 0
        )  # none here
    (result,) = results
    assert (result.status, result.incomplete_reason) == ("cancelled", "stop, please")
    stored = await other.store().get_run("R")
    assert stored is not None
    assert stored.status == "cancelled"
    await runner.aclose()
    await other.aclose()


async def test_a_cancel_by_run_id_from_another_kernel_stops_the_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    slow_agent(workspace)
    runner, other = make_kernel(), make_kernel()
    results = []

    async def run() -> None:
        results.append(await runner.run("a", "go", session_id="S", run_id="R"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await started(other, "R")
        assert await other.request_cancel("R")
    assert results[0].status == "cancelled"
    assert not await other.request_cancel("R")  # not running any more
    assert not await other.request_cancel("never")
    await runner.aclose()
    await other.aclose()


@pytest.mark.parametrize(
    ("leases", "key", "expected"),
    [
        ("{ttl: 10s, heartbeat: 6s}", "leases.heartbeat", "at most half of leases.ttl"),
        ("{ttl: '0'}", "leases.ttl", "a duration above zero"),
        ("{cancel_poll: '0'}", "leases.cancel_poll", "a duration above zero"),
    ],
)
def test_lease_settings_are_validated(
    workspace: Workspace, make_kernel: Callable[..., Kernel], leases: str, key: str, expected: str
) -> None:
    workspace.write_config(f"leases: {leases}\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    message = str(caught.value)
    assert "config.yaml:1:" in message
    assert key in message
    assert expected in message


async def test_a_lease_left_held_when_its_kernel_closes_is_not_renewed_by_the_next_opening(
    workspace: Workspace,
) -> None:
    # One keeper renews every held lease, in the kernel's nursery: a lease never released (a
    # holder's bug, a task abandoned at shutdown) must expire once the kernel closes, not be
    # renewed for ever by the keeper of the kernel's next opening.
    workspace.write_config(FAST)
    one = Kernel.load(workspace.path, autoload=False)
    two = Kernel.load(workspace.path, autoload=False)
    async with open_kernel(kernel=one, services="runs"):
        assert await one.leases.acquire("leaked", holder="x") is not None
    async with open_kernel(kernel=one, services="runs"):
        other = await one.leases.acquire("other", holder="y")
        assert other is not None
        await trio.sleep(1.0)  # three ttls
        got = await two.leases.acquire("leaked", holder="z", wait=False)
        await one.leases.release(other)
    assert got is not None, "the lease left held at the first opening is still renewed"
    await two.leases.release(got)
    await two.aclose()
