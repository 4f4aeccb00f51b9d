"""The HTTP plugin keeps the logs of the runs that finished last, ``server.finished_runs_kept``
of them, for reconnections: the oldest goes as each run finishes, without a scan of every log
(a finished run cost a pass over all kept logs), and never a live retry's log of a kept id."""

from __future__ import annotations

from soulacy.kernel import Event
from soulacy.plugins.http._runlog import RunLogs


def finish(logs: RunLogs, run_id: str) -> None:
    logs.observe(Event("run.started", {"principal": "alice"}, run_id=run_id))
    logs.observe(Event("run.completed", {"status": "completed"}, run_id=run_id))


def test_the_logs_that_finished_last_are_kept() -> None:
    logs = RunLogs(finished_kept=2)
    for run_id in ("a", "b", "c"):
        finish(logs, run_id)
    assert [r for r in "abc" if logs.get(r) is not None] == ["b", "c"]


def test_a_retry_under_a_kept_id_is_never_evicted_while_it_runs() -> None:
    logs = RunLogs(finished_kept=2)
    finish(logs, "a")
    logs.observe(Event("run.started", {"principal": "alice"}, run_id="a"))  # its retry runs
    finish(logs, "b")
    finish(logs, "c")  # "a" is the oldest finished id: its retry's log is live
    retry = logs.get("a")
    assert retry is not None
    assert not retry.finished
    assert [r for r in "bc" if logs.get(r) is not None] == ["b", "c"]
