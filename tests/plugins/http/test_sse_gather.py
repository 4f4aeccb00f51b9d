"""A stream that falls behind a fast run gathers what it has ready with plain Trio: it sleeps on
its run's log until ``GATHER_EVENTS`` are unread, the run finished, half the bounded log is
unread, or ``GATHER_SECONDS`` passed (decision 0040's rule, counted in events).

What these tests show comes from the order of events, never from how fast this machine is:
the clock stands still (``mock_clock``) unless a test moves it, or moves only when every task
waits (``autojump_clock``: a deadline is a backstop there, never what the figures come from).
"""

from __future__ import annotations

import math
from typing import Any

import trio
import trio.testing

from soulacy.plugins.http._app import pump_log
from soulacy.plugins.http._asgi import sse
from soulacy.plugins.http._gather import GATHER_EVENTS, GATHER_SECONDS, gathered
from soulacy.plugins.http._runlog import RunLog


class Sent:
    """An ASGI ``send`` that keeps the bodies written, yielding as hypercorn's does."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.bodies.append(message["body"])
        for _ in range(3):
            await trio.lowlevel.checkpoint()

    @property
    def text(self) -> bytes:
        return b"".join(self.bodies)

    def deltas(self) -> list[int]:
        """Delta events per write."""
        return [body.count(b"event: delta") for body in self.bodies]


def delta(n: int) -> bytes:
    return sse(n, "delta", {"text": f"w{n} "})


def expected(count: int, first: int = 1) -> bytes:
    deltas = b"".join(delta(n) for n in range(first, count + 1))
    return deltas + sse(count + 1, "result", {"reply": "done"})


async def fast_run(log: RunLog, count: int, *, finish: bool = True) -> None:
    for n in range(1, count + 1):  # a model whose deltas are ready: one per scheduler turn
        log.append("delta", {"text": f"w{n} "})
        await trio.lowlevel.checkpoint()
    if finish:
        log.append("result", {"reply": "done"})


async def test_a_fast_run_arrives_in_writes_of_gather_events_each_and_ends_with_its_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(fast_run, log, 600)
    assert sent.text == expected(600)
    assert sent.bodies[-1].endswith(sse(601, "result", {"reply": "done"}))
    # A few writes before the stream is busy, then one per GATHER_EVENTS: never one per event.
    assert len(sent.bodies) <= math.ceil(600 / GATHER_EVENTS) + 4, sent.deltas()
    assert sorted(sent.deltas())[len(sent.bodies) // 2] >= GATHER_EVENTS


async def test_a_gathering_stream_is_woken_once_per_write(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Steps(trio.abc.Instrument):  # counts the stream's task steps (a test's diagnostic)
        steps = 0

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            if task.name.endswith("pump_log"):
                self.steps += 1

    log = RunLog("r1", "alice", limit=10_000)
    sent, steps = Sent(), Steps()
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_log, sent, log, 0)
            nursery.start_soon(fast_run, log, 600)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert sent.text == expected(600)
    # Per write: its wake-up and the send's own steps. A step per turn would be 600 or more.
    assert steps.steps <= 6 * len(sent.bodies) + 10, (steps.steps, len(sent.bodies))


async def test_the_result_ends_a_wait_at_once(mock_clock: trio.testing.MockClock) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    ended = trio.Event()

    async def stream() -> None:
        await pump_log(sent, log, 0)
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream)
        nursery.start_soon(fast_run, log, GATHER_EVENTS // 4)  # fewer than a gathered write
        await trio.testing.wait_all_tasks_blocked()
        assert ended.is_set(), "the stream still waits for events of a run that finished"
    assert sent.text == expected(GATHER_EVENTS // 4)


async def test_a_run_quiet_mid_burst_has_its_events_written_after_gather_seconds_not_its_next(
    mock_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    more = trio.Event()

    async def run() -> None:
        await fast_run(log, 40, finish=False)
        await more.wait()  # its model has nothing more for now
        log.append("result", {"reply": "done"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        assert delta(40) not in sent.text  # gathering: fewer than GATHER_EVENTS unread
        mock_clock.jump(GATHER_SECONDS)
        await trio.testing.wait_all_tasks_blocked()
        assert sent.text == expected(40)[: -len(sse(41, "result", {"reply": "done"}))]
        more.set()
    assert sent.text == expected(40)


async def test_a_slow_runs_events_are_each_written_before_the_next_is_made(
    mock_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        for n in range(1, 6):  # a model that waits between its tokens
            log.append("delta", {"text": f"w{n} "})
            await trio.testing.wait_all_tasks_blocked()  # the clock does not move meanwhile
            assert sent.bodies[-1] == delta(n)
        log.append("result", {"reply": "done"})
    assert sent.text == expected(5)


async def test_a_small_log_is_written_before_it_drops_what_the_stream_has_not_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=8)  # keeps 8 to 10 events: gathers at most 4
    sent = Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(fast_run, log, 200)
    assert b"event: gap" not in sent.text
    assert sent.text == expected(200)


async def test_two_streams_of_one_run_each_get_every_event_in_few_writes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    for n in range(1, 11):
        log.append("delta", {"text": f"w{n} "})
    first, resumed = Sent(), Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, first, log, 0)
        nursery.start_soon(pump_log, resumed, log, 7)  # waits for other ids than the first
        nursery.start_soon(fast_run_from, log, 11, 600)
    assert first.text == expected(600)
    assert resumed.text == expected(600, first=8)
    assert len(first.bodies) <= math.ceil(600 / GATHER_EVENTS) + 6, first.deltas()
    assert len(resumed.bodies) <= math.ceil(600 / GATHER_EVENTS) + 6, resumed.deltas()


async def fast_run_from(log: RunLog, first: int, last: int) -> None:
    for n in range(first, last + 1):
        log.append("delta", {"text": f"w{n} "})
        await trio.lowlevel.checkpoint()
    log.append("result", {"reply": "done"})


async def test_a_stream_cancelled_while_it_gathers_leaves_the_others_unharmed(
    mock_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    left, stays = Sent(), Sent()
    ended = trio.Event()

    async def stream() -> None:
        await pump_log(stays, log, 0)
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream)
        async with trio.open_nursery() as leaving:
            leaving.start_soon(pump_log, left, log, 0)
            for n in range(1, 21):  # both streams busy, fewer than GATHER_EVENTS unread
                log.append("delta", {"text": f"w{n} "})
                await trio.lowlevel.checkpoint()
            await trio.testing.wait_all_tasks_blocked()
            assert delta(20) not in left.text + stays.text  # both gather
            leaving.cancel_scope.cancel()  # one's client left mid-gather
        await fast_run_from(log, 21, 300)
        await trio.testing.wait_all_tasks_blocked()
        assert ended.is_set(), "the stream that stayed still waits"
    assert stays.text == expected(300)
    assert len(stays.bodies) <= math.ceil(300 / GATHER_EVENTS) + 4, stays.deltas()


async def test_wait_appended_returns_at_its_id_or_the_result_whoever_else_waits(
    mock_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    woke: list[tuple[int, int]] = []  # (id waited for, log.next_id when it returned)

    async def waiter(event_id: int) -> None:
        await log.wait_appended(event_id)
        woke.append((event_id, log.next_id))

    async with trio.open_nursery() as nursery:
        for event_id in (5, 2, 9):  # a later stream asks for an earlier id, and a later one
            nursery.start_soon(waiter, event_id)
        for n in range(1, 7):
            log.append("delta", {"text": f"w{n} "})
            await trio.testing.wait_all_tasks_blocked()
        assert woke == [(2, 3), (5, 6)]  # each right after its own id, not before
        log.append("result", {"reply": "done"})  # id 7: the run ended, id 9 never comes
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [(2, 3), (5, 6), (9, 8)]


async def test_gathered_returns_at_once_when_the_writes_are_behind_already(
    mock_clock: trio.testing.MockClock,
) -> None:
    log = RunLog("r1", "alice", limit=10_000)
    for n in range(1, GATHER_EVENTS + 2):
        log.append("delta", {"text": f"w{n} "})
    with trio.testing.assert_no_checkpoints():
        await gathered(log, 1)  # GATHER_EVENTS unread: nothing to wait for
    log.append("result", {"reply": "done"})
    with trio.testing.assert_no_checkpoints():
        await gathered(log, GATHER_EVENTS + 1)  # finished
