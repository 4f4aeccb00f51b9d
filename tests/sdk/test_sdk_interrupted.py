"""A run its stopping server interrupted reads as such in the SDK (docs/sdk.md)."""

from __future__ import annotations

from soulacy.sdk import ChatResponse, StreamEvent

INTERRUPTED = {
    "reply": "",
    "run_id": "R1",
    "session_id": "S1",
    "status": "interrupted",
    "verification": "unverified",
    "metadata": {"status": "interrupted", "incomplete_reason": "shutdown", "run_id": "R1"},
}


def test_an_interrupted_result_says_so_and_names_the_run_to_retry() -> None:
    response = StreamEvent(7, "result", INTERRUPTED).response()
    assert response.interrupted
    assert not response.completed
    assert (response.incomplete_reason, response.run_id) == ("shutdown", "R1")


def test_a_completed_result_is_not_interrupted() -> None:
    done = ChatResponse.from_json({**INTERRUPTED, "status": "completed", "metadata": {}})
    assert not done.interrupted
    assert done.incomplete_reason is None
