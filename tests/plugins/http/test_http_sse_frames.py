"""Each SSE event is encoded once for all the streams of its run, and a stream that gathers
a fast run's events is woken once per write, not at every scheduler turn (decision 0043)."""

from __future__ import annotations

import datetime
import decimal
import json
import math
from typing import Any

import pytest
import trio

from soulacy.kernel import Event
from soulacy.plugins.http._app import pump_log
from soulacy.plugins.http._asgi import sse, to_json
from soulacy.plugins.http._runlog import RunLog, RunLogs


class Sent:
    """An ASGI ``send`` that keeps the bodies written, yielding as hypercorn's does."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.bodies.append(message["body"])
        for _ in range(3):
            await trio.lowlevel.checkpoint()


class TaskSteps(trio.abc.Instrument):
    """How many times Trio ran each task named ``name``: its wake-ups."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith(self.name):
            self.steps += 1


def expected(count: int) -> bytes:
    deltas = b"".join(sse(n, "delta", {"text": f"w{n} "}) for n in range(1, count + 1))
    return deltas + sse(count + 1, "result", {"reply": "done"})


async def fast_run(log: RunLog, count: int) -> None:
    for n in range(1, count + 1):  # a model whose deltas are ready: one per scheduler turn
        log.append("delta", {"text": f"w{n} "})
        await trio.lowlevel.checkpoint()
    log.append("result", {"reply": "done"})


@pytest.mark.parametrize(
    "value",
    [
        {"text": "w000001 "},
        {"é": "ü\u2028\x00", "n": None, "t": True, "f": 1.5, "nan": math.nan, "inf": -math.inf},
        {3: "int key", 2.5: "float key", None: 1, False: 0, "z": 1, "a": 2},
        {"l": [1, (2, 3), {"x": datetime.date(2020, 1, 1)}], "d": decimal.Decimal("1.1")},
        {"set": {1}, "nested": {"deep": [[[]]]}},
        "a string",
        7,
        [],
    ],
)
def test_the_cached_encoder_writes_what_json_dumps_writes(value: Any) -> None:
    assert to_json(value) == json.dumps(value, default=str)


def test_a_value_json_refuses_is_refused_the_same_way() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular reference detected"):
        to_json(circular)
    with pytest.raises(TypeError, match="keys must be"):
        to_json({(1, 2): "a tuple key"})


def test_a_run_that_no_stream_reads_encodes_nothing() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    log.append("delta", {"text": "w1 "})
    log.append("result", {"reply": "done"})
    assert [e.frame for e in log.after(0)[1]] == [None, None]


async def test_an_event_is_encoded_once_for_every_stream_of_its_run() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    data = {"text": "w1 "}
    log.append("delta", data)
    log.append("result", {"reply": "done"})
    first, second = Sent(), Sent()
    await pump_log(first, log, 0)
    (event,) = log.events
    assert event.frame == sse(1, "delta", {"text": "w1 "})
    data["text"] = "changed afterwards"  # not encoded again: the bytes the first stream wrote
    await pump_log(second, log, 0)
    assert b"".join(second.bodies) == b"".join(first.bodies) == expected(1)


async def test_every_stream_of_a_run_writes_the_frames_of_its_log() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    first, second = Sent(), Sent()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, first, log, 0)
        nursery.start_soon(pump_log, second, log, 5)
        nursery.start_soon(fast_run, log, 50)
    assert b"".join(first.bodies) == expected(50)
    after_five = b"".join(sse(n, "delta", {"text": f"w{n} "}) for n in range(6, 51))
    assert b"".join(second.bodies) == after_five + sse(51, "result", {"reply": "done"})


async def test_a_gathering_stream_wakes_once_per_write_not_per_event() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    sent = Sent()
    steps = TaskSteps("pump_log")
    trio.lowlevel.add_instrument(steps)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pump_log, sent, log, 0)
            nursery.start_soon(fast_run, log, 600)
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert b"".join(sent.bodies) == expected(600)
    # Each write: one wake-up, three in send(). Checking the log at every turn took 600+.
    assert steps.steps <= 6 * len(sent.bodies) + 10, (steps.steps, len(sent.bodies))
    assert len(sent.bodies) <= 60


async def test_a_run_that_goes_quiet_mid_burst_has_its_events_written_at_once() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    written = trio.Event()
    waiting = trio.Event()

    class Watched(Sent):
        async def __call__(self, message: dict[str, Any]) -> None:
            await super().__call__(message)
            if b'"w40 "' in message["body"]:
                written.set()

    async def run() -> None:
        for n in range(1, 41):
            log.append("delta", {"text": f"w{n} "})
            await trio.lowlevel.checkpoint()
        await waiting.wait()  # the model has nothing more for now: no task can run
        log.append("result", {"reply": "done"})

    sent = Watched()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump_log, sent, log, 0)
        nursery.start_soon(run)
        # Not held until the run's next event, nor until the next deadline of the process
        # (here this one: nothing else would end Trio's wait for I/O).
        with trio.fail_after(1):
            await written.wait()
        waiting.set()
    assert b"".join(sent.bodies) == expected(40)


async def test_a_stream_writes_the_frames_of_its_own_principals_log_alone() -> None:
    logs = RunLogs()
    bobs = logs.open("x", "bob")
    bobs.append("delta", {"text": "bob's secret"})
    bobs.append("result", {"reply": "bob's secret"})
    logs.observe(Event("run.started", {"principal": "alice"}, run_id="x"))
    logs.observe(Event("text.delta", {"text": "alice's"}, run_id="x"))
    logs.observe(Event("run.completed", {"reply": "alice's"}, run_id="x"))
    alices = logs.get("x")
    assert alices is not None
    assert alices is not bobs
    to_alice, to_bob = Sent(), Sent()
    await pump_log(to_alice, alices, 0)
    await pump_log(to_bob, bobs, 0)
    assert b"secret" not in b"".join(to_alice.bodies)
    assert b"alice" not in b"".join(to_bob.bodies)
    assert b"".join(to_bob.bodies) == b"".join(e.frame for e in [*bobs.events, bobs.result])


async def test_data_json_refuses_fails_the_stream_that_writes_it_never_the_run() -> None:
    log = RunLog("r1", "alice", limit=10_000)
    log.append("delta", {"text": "w1 "})
    log.append("tool.result", {(1, 2): "a key JSON has no form for"})  # no error here
    log.append("result", {"reply": "done"})
    assert log.finished
    with pytest.raises(TypeError, match="keys must be"):
        await pump_log(Sent(), log, 0)  # as before 0043: the stream, when it writes it
