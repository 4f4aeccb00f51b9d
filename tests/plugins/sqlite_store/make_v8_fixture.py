"""Writes ``v8_store.sql`` and ``v8_store.json``: a store file made by the schema-8 code (the
code before docs/decisions/0039), and what that code read from it. Kept for the record; it only
means something when run with that code (PYTHONPATH pointing at a tree of it):

    PYTHONPATH=/path/to/schema-8/tree python tests/plugins/sqlite_store/make_v8_fixture.py

The runs: "done" (two turns with tool records, finished, one entry given metadata of its own),
"retried" (attempt 1 crashed, attempt 2 finished), "again" (attempt 1 finished, attempt 2
running) and "running" (never finished), in two sessions.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import attrs
import trio

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import RunRecord, ToolRecord
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore

HERE = Path(__file__).parent


async def fill(store: SQLiteStore) -> None:
    done = await store.start_run(RunRecord("done", "agent", "s1", "u", "alice", started_at=1.0))
    for n in range(2):
        call = ToolCall(f"c{n}", "step", {"i": n})
        await store.record_turn(
            done,
            [
                Message("assistant", "", tool_calls=(call,)),
                Message("tool", f"ok-{n}", tool_call_id=f"c{n}", name="step"),
            ],
            [ToolRecord("done", f"c{n}", "step", {"i": n}, f"ok-{n}", False, 10.0 + n)],
        )
    await store.finish_run("done", {"status": "completed", "run_id": "done"})
    await store.finalize_proof("done", {"status": "completed", "run_id": "done"})
    retried = RunRecord("retried", "agent", "s1", "u", "alice", started_at=2.0)
    retried = await store.start_run(retried)
    await store.record_turn(retried, [Message("user", "first try")], [])
    retried = await store.start_run(attrs.evolve(retried, started_at=3.0))
    await store.record_turn(retried, [Message("user", "second try")], [])
    await store.finish_run("retried", {"status": "failed", "run_id": "retried"})
    again = await store.start_run(RunRecord("again", "agent", "s2", None, None, started_at=4.0))
    await store.record_turn(again, [Message("user", "once")], [])
    await store.finish_run("again", {"status": "incomplete", "run_id": "again"})
    again = await store.start_run(RunRecord("again", "agent", "s2", None, None, started_at=5.0))
    await store.record_turn(again, [Message("user", "twice")], [])
    running = await store.start_run(RunRecord("running", "other", "s2", None, None, started_at=6.0))
    await store.record_turn(running, [Message("user", "still going")], [])


async def read(store: SQLiteStore) -> dict[str, object]:
    entries = [*await store.history("s1"), *await store.history("s2")]
    return {
        "history": [[e.id, e.run_id, e.role, e.content, e.attempt, e.metadata] for e in entries],
        "load_history": [m.content for m in await store.load_history("agent", "s1", "alice", "u")],
        "tool_records": sorted(await store.load_tool_records("done")),
        "runs": {
            r.run_id: [r.status, r.attempt, r.metadata] for r in await store.list_runs(limit=10)
        },
        "proof": (p := await store.get_proof("done")) and p.sha256,
    }


async def main() -> None:
    assert SCHEMA_VERSION == 8, "run this with the schema-8 code"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soulacy.db"
        store = SQLiteStore(path)
        await fill(store)
        await store.aclose()
        conn = sqlite3.connect(path)
        # An entry whose metadata is not its run's (as an older writer could leave it).
        conn.execute("UPDATE conversation_history SET metadata = '{\"own\": 1}' WHERE id = 2")
        conn.commit()
        dump = "\n".join(conn.iterdump())
        conn.close()
        store = SQLiteStore(path)
        expected = await read(store)
        await store.aclose()
    (HERE / "v8_store.sql").write_text(f"PRAGMA user_version = 8;\n{dump}\n")
    (HERE / "v8_store.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    trio.run(main)
