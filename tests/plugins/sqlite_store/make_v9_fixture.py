"""Writes ``v9_store.sql`` and ``v9_store.json``: a store file made by the schema-9 code (the
code before docs/decisions/0047, every tool record a row of ``tool_records``), and what that
code read from it. Kept for the record; it only means something when run with that code
(PYTHONPATH pointing at a tree of it):

    PYTHONPATH=/path/to/schema-9/tree python tests/plugins/sqlite_store/make_v9_fixture.py

The runs: "done" (alice: two tool turns, an approval receipt before the second call, a record
whose content is not its message's, finished, proved), "crashed" (bob, the same session and
agent: one tool turn, then nothing: a retry continues it) and "other" (bob, another session,
the same call id as "done").
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import RunRecord, ToolRecord
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore

HERE = Path(__file__).parent
RUNS = ("done", "crashed", "other")


def turn(call: ToolCall, content: str) -> list[Message]:
    return [
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", content, tool_call_id=call.id, name=call.name),
    ]


async def fill(store: SQLiteStore) -> None:
    done = await store.start_run(RunRecord("done", "agent", "s1", "u", "alice", started_at=1.0))
    first, second = ToolCall("c0", "step", {"i": 0}), ToolCall("c1", "step", {"i": 1})
    await store.record_turn(
        done,
        [Message("user", "go"), *turn(first, "ok-0\n\n[soulacy] warning")],
        [ToolRecord("done", "c0", "step", {"i": 0}, "ok-0", False, 10.0)],
    )
    receipt = ToolRecord("done", "approval:c1", "approval", {"call_id": "c1"}, "{}", False, 11.0)
    await store.record_turn(
        done,
        turn(second, "ok-1"),
        [receipt, ToolRecord("done", "c1", "step", {"i": 1}, "ok-1", False, 12.0)],
    )
    await store.record_turn(done, [Message("assistant", "done")], [])
    await store.finish_run("done", {"status": "completed", "run_id": "done"})
    await store.finalize_proof("done", {"status": "completed", "run_id": "done"})
    crashed = await store.start_run(RunRecord("crashed", "agent", "s1", "u", "bob", started_at=2.0))
    await store.record_turn(
        crashed,
        [Message("user", "go"), *turn(first, "bob-0")],
        [ToolRecord("crashed", "c0", "step", {"i": 0}, "bob-0", False, 20.0)],
    )
    other = await store.start_run(RunRecord("other", "agent", "s2", None, "bob", started_at=3.0))
    await store.record_turn(
        other,
        turn(first, "other-0"),
        [ToolRecord("other", "c0", "step", {"i": 0}, "other-0", True, 30.0)],
    )


async def read(store: SQLiteStore) -> dict[str, object]:
    entries = [*await store.history("s1"), *await store.history("s2")]
    records = {}
    for run_id in RUNS:
        records[run_id] = [
            [r.call_id, r.name, dict(r.arguments), r.content, r.is_error, r.created_at]
            for r in (await store.load_tool_records(run_id)).values()
        ]
    proof = await store.get_proof("done")
    return {
        "history": [[e.id, e.run_id, e.role, e.content, e.attempt, e.metadata] for e in entries],
        "tool_records": records,
        "runs": {
            r.run_id: [r.status, r.attempt, r.principal] for r in await store.list_runs(limit=10)
        },
        "proof": proof and [proof.sha256, proof.receipts, proof.body],
    }


async def main() -> None:
    assert SCHEMA_VERSION == 9, "run this with the schema-9 code"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soulacy.db"
        store = SQLiteStore(path)
        await fill(store)
        await store.aclose()
        conn = sqlite3.connect(path)
        dump = "\n".join(conn.iterdump())
        conn.close()
        store = SQLiteStore(path)
        expected = await read(store)
        await store.aclose()
    (HERE / "v9_store.sql").write_text(f"PRAGMA user_version = 9;\n{dump}\n")
    (HERE / "v9_store.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    trio.run(main)
