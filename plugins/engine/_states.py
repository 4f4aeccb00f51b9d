"""A run's life as one state machine (docs/running.md#a-runs-life, decision 0063).

Every run of the engine is in one of these states, and moves only along :data:`TRANSITIONS`;
each transition says what causes it and what it writes to the store, always under the run's
fence (its conversation's lease). The table in docs/running.md is rendered from this module
(``python -m soulacy.plugins.engine._states``), and a test holds the two together.
"""

from __future__ import annotations

import enum
import logging

import attrs

log = logging.getLogger("soulacy.engine")


class RunState(enum.Enum):
    QUEUED = "queued"  # reserved; waiting for its conversation's turn and lease
    STARTING = "starting"  # holds the lease, identity checked; nothing stored yet
    RUNNING = "running"  # recorded as started (its attempt); calling models and tools
    AWAITING_APPROVAL = "awaiting approval"  # a tool call waits for a person's decision
    FINISHED = "finished"  # how it ended is stored, with its proof; the lease given back
    NOT_STORED = "not stored"  # ended before its start was stored: nothing of it is
    UNSTORED = "unstored"  # the store refused how it ended: kept, under its lease, for later
    INTERRUPTED = "interrupted"  # its process stopped it: left unfinished, resumable by its id
    SUSPENDED = "suspended"  # stopped while awaiting approval: a decision resumes it
    LOST = "lost"  # its lease was taken over: it writes nothing more, anywhere


ENDED = frozenset(
    {
        RunState.FINISHED,
        RunState.NOT_STORED,
        RunState.UNSTORED,
        RunState.INTERRUPTED,
        RunState.SUSPENDED,
        RunState.LOST,
    }
)


@attrs.frozen
class Transition:
    source: RunState
    target: RunState
    cause: str
    writes: str
    outside: bool = False  # it can come from outside the run (a cancel, a stop, the store)


S = RunState
TRANSITIONS: tuple[Transition, ...] = (
    Transition(S.QUEUED, S.STARTING, "its turn came: it holds the conversation's lease",
               "the lease"),
    Transition(S.QUEUED, S.NOT_STORED, "cancelled while queued, or its kernel stopped",
               "nothing", outside=True),
    Transition(S.STARTING, S.RUNNING,
               "a fresh id claimed in the store (insert-or-fail); a retry at its first turn"
               " boundary (or a restored ending)",
               "the run's start: its attempt"),
    Transition(S.STARTING, S.NOT_STORED,
               "refused before its start: its id is another request's (a race lost on any"
               " process), or cancelled",
               "nothing (the lease is given back)", outside=True),
    Transition(S.STARTING, S.LOST, "its lease was taken over before its start",
               "nothing", outside=True),
    Transition(S.RUNNING, S.AWAITING_APPROVAL, "a tool call needs a person's decision",
               "the turn so far and the approval request"),
    Transition(S.AWAITING_APPROVAL, S.RUNNING, "the call was decided",
               "the decision's receipt, with the next turn"),
    Transition(S.RUNNING, S.FINISHED,
               "completed, or ended incomplete, failed or cancelled (a limit, a deadline, a"
               " cancel, a strategy's RunStop)",
               "the rest of the turn, a result for every cut tool call, its ending and proof",
               outside=True),
    Transition(S.AWAITING_APPROVAL, S.FINISHED,
               "cancelled, or its run timeout passed, while it waited",
               "the same, the unanswered call answered as cancelled", outside=True),
    Transition(S.RUNNING, S.INTERRUPTED, "its kernel stopped (after the drain's grace)",
               "the turn so far and a result for every cut tool call; not its ending",
               outside=True),
    Transition(S.AWAITING_APPROVAL, S.SUSPENDED,
               "it waited longer than approvals.suspend_after, or its kernel stopped or its"
               " caller went away while it waited",
               "the turn so far (the request stored before the wait); not its ending; the"
               " lease given back", outside=True),
    Transition(S.RUNNING, S.UNSTORED, "the store refused a write (failed, storage_error)",
               "nothing now: kept under its lease, renewed", outside=True),
    Transition(S.UNSTORED, S.FINISHED, "the store answers again (a heartbeat after)",
               "the turn and its ending, as the caller was told", outside=True),
    Transition(S.UNSTORED, S.LOST, "its lease was taken over meanwhile", "nothing",
               outside=True),
    Transition(S.UNSTORED, S.INTERRUPTED,
               "its kernel closed and the last attempt failed too",
               "nothing; the store reads it interrupted once the lease lapses", outside=True),
    Transition(S.RUNNING, S.LOST, "its lease was taken over (a process paused past it)",
               "nothing anywhere: every write is fenced, the shared event log's too",
               outside=True),
    Transition(S.AWAITING_APPROVAL, S.LOST, "its lease was taken over while it waited",
               "nothing", outside=True),
)  # fmt: skip
ALLOWED = frozenset((t.source, t.target) for t in TRANSITIONS)


class Life:
    """A run's state and the states it went through (a few per run: the trace grows with
    approvals, never with turns)."""

    __slots__ = ("state", "trace")

    def __init__(self) -> None:
        self.state = RunState.QUEUED
        self.trace = [RunState.QUEUED]

    def move(self, target: RunState, run_id: str) -> None:
        if target is self.state:
            return
        if (self.state, target) not in ALLOWED:  # an engine bug: said, never hidden
            log.error("run %s: no transition %s -> %s", run_id, self.state.value, target.value)
        self.state = target
        self.trace.append(target)

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def table() -> str:
    """The transitions as the Markdown table of docs/running.md."""
    lines = [
        "| from | to | when | written to the store (under the run's fence) |",
        "|---|---|---|---|",
    ]
    for t in TRANSITIONS:
        cause = t.cause + (" *(from outside)*" if t.outside else "")
        lines.append(f"| {t.source.value} | {t.target.value} | {cause} | {t.writes} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(table(), end="")
