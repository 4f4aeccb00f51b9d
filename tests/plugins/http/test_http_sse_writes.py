"""How a stream writes its run's events: what a fast run has ready in one ``send()``, a lone
event at once, and the same bytes either way."""

from __future__ import annotations

from typing import Any

import trio

from soulacy.plugins.http._app import pump_log
from soulacy.plugins.http._asgi import sse
from soulacy.plugins.http._runlog import RunLog


class Sent:
    """An ASGI ``send`` that keeps the bodies written."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.arrived = trio.Event()

    async def __call__(self, message: dict[str, Any]) -> None:
        self.bodies.append(message["body"])
        self.arrived.set()
        for _ in range(3):  # a write yields a few times, as hypercorn's send() does
            await trio.lowlevel.checkpoint()


def expected(count: int) -> bytes:
    deltas = b"".join(sse(n, "delta", {"text": f"w{n} "}) for n in range(1, count + 1))
    return deltas + sse(count + 1, "result", {"reply": "done"})


async def stream_fast_run(log: RunLog, count: int) -> Sent:
    """Stream ``log`` while a fast run appends ``count`` deltas to it (a model whose deltas are
    ready: one per scheduler turn), then its result; what the stream sent."""
    sent = Sent()

    async def fast_run() -> None:
        for n in range(1, count + 1):
            log.append("delta", {"text": f"w{n} "})
            await trio.lowlevel.checkpoint()
        log.append("result", {"reply": "done"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(fast_run)
    return sent


async def test_a_fast_run_is_written_in_few_sends_with_the_same_bytes() -> None:
    sent = await stream_fast_run(RunLog("r1", "alice", limit=10_000), 300)
    assert b"".join(sent.bodies) == expected(300)
    assert len(sent.bodies) <= 30  # one send per event (or per three) before


async def test_an_event_after_a_quiet_spell_goes_at_once() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        for n in range(1, 4):  # a model that waits between its tokens
            sent.arrived = trio.Event()
            log.append("delta", {"text": f"w{n} "})
            with trio.fail_after(1):
                await sent.arrived.wait()  # written before the next one exists
            assert sent.bodies[-1] == sse(n, "delta", {"text": f"w{n} "})
            await trio.sleep(0.01)
        log.append("result", {"reply": "done"})
    assert b"".join(sent.bodies) == expected(3)


async def test_a_reader_that_resumes_gets_the_events_after_its_id() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    for n in range(1, 6):
        log.append("delta", {"text": f"w{n} "})
    log.append("result", {"reply": "done"})
    sent = Sent()
    await pump_log(sent, log, 3)
    after = b"".join(sse(n, "delta", {"text": f"w{n} "}) for n in (4, 5))
    assert b"".join(sent.bodies) == after + sse(6, "result", {"reply": "done"})


async def test_gathering_never_costs_a_small_log_its_events() -> None:
    log = RunLog("r1", "alice", limit=8)  # dropped from 11 events on, down to 8
    sent = await stream_fast_run(log, 200)
    assert b"event: gap" not in b"".join(sent.bodies)
    assert b"".join(sent.bodies) == expected(200)


async def test_the_first_token_of_a_burst_is_not_held_back() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()

    async def run() -> None:  # the run's start, then a reply whose tokens are all ready
        log.append("run", {"run_id": "r1"})
        log.append("run.limits", {})
        await trio.lowlevel.checkpoint()
        for n in range(1, 101):
            log.append("delta", {"text": f"w{n} "})
            await trio.lowlevel.checkpoint()
        log.append("result", {"reply": "done"})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(run)
    first = next(body for body in sent.bodies if b'"w1 "' in body)
    assert first.count(b"event: delta") <= 4  # not the 30-odd of a gathered write
