"""The translation of a run's kernel events into AG-UI events, without a server: the cases a
scripted model over HTTP does not reach (a provider that does not stream, a run that failed)."""

from __future__ import annotations

from typing import Any

from agui_support import EVENT, Received, check_lifecycle

from soulacy.kernel import RunResult
from soulacy.plugins.agui._translate import Translator


def _checked(made: list[dict[str, Any]]) -> list[Received]:
    events = [Received(n, EVENT.validate_python(e), e) for n, e in enumerate(made, start=1)]
    check_lifecycle(events)
    return events


def test_a_reply_that_did_not_stream_is_sent_whole_before_the_end() -> None:
    translator = Translator("t", "r", None)
    result = RunResult("r", "t", "a", reply="all at once", status="completed")
    events = _checked([*translator.start("a"), *translator.finish(result)])
    assert [e.type for e in events] == [
        "RUN_STARTED",
        "STATE_SNAPSHOT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[3].event.delta == "all at once"


def test_a_streamed_reply_is_not_sent_twice() -> None:
    translator = Translator("t", "r", None)
    made = [*translator.start("a"), *translator.text("all "), *translator.text("streamed")]
    result = RunResult("r", "t", "a", reply="all streamed", status="completed")
    events = _checked([*made, *translator.finish(result)])
    assert "".join(e.event.delta for e in events if e.type == "TEXT_MESSAGE_CONTENT") == (
        "all streamed"
    )


def test_a_failed_run_ends_with_run_error_naming_the_error() -> None:
    translator = Translator("t", "r", {"k": 1})
    made = [*translator.start("a"), *translator.text("partial")]
    result = RunResult("r", "t", "a", status="failed", error="provider down")
    events = _checked([*made, *translator.finish(result)])
    assert events[-1].type == "RUN_ERROR"
    assert events[-1].event.message == "run r ended failed: provider down"
    assert events[-1].event.code == "failed"
    assert events[-2].event.snapshot == {"k": 1, "soulacy": events[-2].raw["snapshot"]["soulacy"]}


def test_a_run_the_server_stopped_closes_what_it_opened_and_ends_with_run_error() -> None:
    translator = Translator("t", "r", None)
    events = _checked([*translator.start("a"), *translator.text("half"), *translator.stopped()])
    assert [e.type for e in events][-3:] == ["TEXT_MESSAGE_END", "STATE_SNAPSHOT", "RUN_ERROR"]
    assert events[-1].event.code == "shutdown"
    assert events[-2].event.snapshot["soulacy"]["status"] == "interrupted"
