"""Migration 7: a decision keeps the result a person gave for a cut call that happened
(docs/decisions/0081). A version 6 database migrates by adding one column; its decisions read
as before, and a request pending since before the upgrade can be told it happened."""

from __future__ import annotations

import psycopg
import pytest

from soulacy.contrib.postgres import PostgresStore, _schema
from soulacy.kernel.store import ApprovalDecision

ROW = (
    "INSERT INTO tool_approvals (run_id, call_id, tool, arguments, agent_id, session_id,"
    " principal, user_id, request, reasons, requested_at, approved, approver, decided_at)"
    " VALUES ('R', %s, 'send', '{\"to\": \"bob\"}', 'a', 'S', 'alice', NULL,"
    ' \'{"text": "tell bob"}\', \'["why"]\', 1.0, %s, %s, %s)'
)


def version_6_database(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as the release of schema 6 left it: one call denied, one cut call pending."""
    with monkeypatch.context() as patched:
        patched.setattr(_schema, "MIGRATIONS", _schema.MIGRATIONS[:6])
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert _schema.migrate(conn) == 0
    with psycopg.connect(dsn) as conn:
        conn.execute(ROW, ("c1", False, "ops", 2.0))
        conn.execute(ROW, ("cut:c2", None, None, None))


async def test_a_version_6_database_migrates_and_a_cut_call_can_be_told_it_happened(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version_6_database(database, monkeypatch)
    store = PostgresStore(database)
    said = "delivered, id 42"
    try:
        assert await store.open() == 6
        denied = await store.get_approval("R", "c1")
        assert denied is not None
        assert denied.decision is not None
        assert (denied.describe()["status"], denied.decision.result) == ("denied", None)
        decided = await store.decide_approval(
            "R", "cut:c2", ApprovalDecision(False, "ops", None, None, result=said), "alice"
        )
        assert decided is not None
        assert (decided.describe()["status"], decided.describe()["result"]) == ("happened", said)
    finally:
        await store.aclose()
    with psycopg.connect(database) as conn:
        rows = conn.execute("SELECT call_id, result FROM tool_approvals ORDER BY call_id")
        assert rows.fetchall() == [("c1", None), ("cut:c2", said)]
