"""Schema 13: a decision keeps the result a person gave for a cut call that happened
(docs/decisions/0081). A version 12 file migrates by adding one column; its decisions read as
before, and a pending request made before the upgrade can be told it happened after it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from soulacy.kernel.store import ApprovalDecision
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore
from soulacy.plugins.sqlite_store._schema import MIGRATIONS

ROW = (
    "INSERT INTO tool_approvals (run_id, call_id, tool, arguments, agent_id, session_id,"
    " principal, user_id, request, reasons, requested_at, approved, approver, decided_by, note,"
    " decided_at) VALUES ('R', ?, 'send', '{\"to\": \"bob\"}', 'a', 'S', 'alice', NULL,"
    ' \'{"text": "tell bob"}\', \'["why"]\', 1.0, ?, ?, NULL, NULL, ?)'
)


def version_12_file(path: Path) -> None:
    """A file as Soulacy's schema 12 left it: one call denied, one cut call pending."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for step in MIGRATIONS[:12]:
            step(conn)
        conn.execute("PRAGMA user_version = 12")
        conn.execute(ROW, ("c1", 0, "ops", 2.0))
        conn.execute(ROW, ("cut:c2", None, None, None))
    finally:
        conn.close()


async def test_a_version_12_file_migrates_and_a_cut_call_can_be_told_it_happened(
    tmp_path: Path,
) -> None:
    path = tmp_path / "soulacy.db"
    version_12_file(path)
    store = SQLiteStore(path)
    try:
        denied = await store.get_approval("R", "c1")
        assert denied is not None
        assert denied.decision is not None
        assert (denied.describe()["status"], denied.decision.result) == ("denied", None)
        said = "delivered, id 42"
        decided = await store.decide_approval(
            "R", "cut:c2", ApprovalDecision(False, "ops", None, None, result=said), "alice"
        )
        assert decided is not None
        assert (decided.describe()["status"], decided.describe()["result"]) == ("happened", said)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
            rows = conn.execute("SELECT call_id, result FROM tool_approvals ORDER BY call_id")
            assert rows.fetchall() == [("c1", None), ("cut:c2", said)]
    finally:
        await store.aclose()


async def test_a_version_12_file_read_only_reads_its_decisions_and_stays_version_12(
    tmp_path: Path,
) -> None:
    path = tmp_path / "soulacy.db"
    version_12_file(path)
    store = SQLiteStore(path, read_only=True)
    try:
        listed = await store.list_approvals("R")
        assert [(r.call_id, r.describe()["status"]) for r in listed] == [
            ("c1", "denied"),
            ("cut:c2", "pending"),
        ]
    finally:
        await store.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (12,)
