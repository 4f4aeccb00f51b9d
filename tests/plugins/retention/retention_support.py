"""Runs of two principals in one session, for the retention tests of every store: each has a
finished run and a running one; ``age`` makes a run's rows older than they are (a store's own
SQL: no API writes the past)."""

from __future__ import annotations

from typing import Any

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import LeaseOwner, RunEventBatch, RunRecord, ToolRecord

DAY = 86400.0
SERVED = "server:\n  port: 0\n"  # the job runs with every service: the HTTP one on a free port
SESSION = "shared"  # the same session id (and agent) for both principals


async def run_of(store: Any, run_id: str, principal: str, *, finish: bool) -> None:
    """A run of ``principal`` with a tool turn, events, a proof and a portal-style state
    (``portal.run_limits:RUN``, written with its run); finished or left running."""
    owner = LeaseOwner.current("retention-test")  # alive: this very process
    grant = await store.acquire_lease(f"run:{run_id}", owner, 600.0, holder=run_id)
    lease = grant.lease
    run = await store.start_run(RunRecord(run_id, "agent", SESSION, principal=principal), lease)
    call = ToolCall("c1", "fetch", {"page": 1})
    await store.record_turn(
        run,
        [
            Message("user", f"{principal}: {run_id}"),
            Message("assistant", "", (call,)),
            Message("tool", "page one", (), "c1", "fetch"),
        ],
        [ToolRecord(run_id, "c1", "fetch", {"page": 1}, "page one", False)],
        fence=lease,
    )
    await store.append_run_events(
        [RunEventBatch(run_id, principal, [], restart=True, fence=lease)], 100
    )
    await store.save_state(f"portal.run_limits:{run_id}", {"limits": {}}, run_id=run_id)
    if finish:
        metadata = {"run_id": run_id, "status": "completed", "verification": "unverified"}
        await store.finish_run(run_id, metadata, fence=lease)
        await store.finalize_proof(run_id, metadata, fence=lease)
        await store.release_lease(lease)


async def two_principals(store: Any) -> None:
    """alice: ``a-old`` finished (to be aged), ``a-going`` running; bob: ``b-new`` finished
    just now, ``b-going`` running. Written in that order."""
    await run_of(store, "a-old", "alice", finish=True)
    await run_of(store, "b-new", "bob", finish=True)
    await run_of(store, "a-going", "alice", finish=False)
    await run_of(store, "b-going", "bob", finish=False)


# Every time a run's rows carry, by table: what ``age`` moves back.
AGED = (
    ("runs", "started_at"),
    ("runs", "finished_at"),
    ("conversation_history", "created_at"),
    ("tool_records", "created_at"),
    ("proofs", "created_at"),
    ("run_events", "created_at"),
)


def age_statements(placeholder: str) -> list[str]:
    """The UPDATEs that move one run's times back by a number of seconds."""
    return [
        f"UPDATE {table} SET {column} = {column} - {placeholder} WHERE run_id = {placeholder}"
        for table, column in AGED
    ]


async def kept(store: Any) -> dict[str, Any]:
    """What each principal still reads: runs, conversation, proofs and run states."""
    out: dict[str, Any] = {}
    for run_id in ("a-old", "b-new", "a-going", "b-going"):
        run = await store.get_run(run_id)
        out[run_id] = {
            "run": run is not None,
            "proof": await store.get_proof(run_id) is not None,
            "state": await store.load_state(f"portal.run_limits:{run_id}") is not None,
            "records": sorted(await store.load_tool_records(run_id)),
        }
    for principal in ("alice", "bob"):
        messages = await store.load_history("agent", SESSION, principal)
        out[principal] = [m.content for m in messages if m.role == "user"]
    return out
