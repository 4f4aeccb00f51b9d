"""The SQL toolkit: a dialect renders a shared statement, a codec decodes a row by name."""

from __future__ import annotations

import sqlite3

from soulacy.kernel.store import HistoryEntry, RunRecord
from soulacy.plugins import sqlkit
from soulacy.plugins.sqlkit import HISTORY, LEASE, POSTGRES, RUN, SQLITE


def test_a_shared_statement_takes_each_drivers_placeholders() -> None:
    text = f"SELECT 1 FROM runs WHERE principal {POSTGRES.same} ? AND name LIKE 'a%'"
    assert SQLITE.sql("SELECT ? LIKE 'a%'") == "SELECT ? LIKE 'a%'"
    assert POSTGRES.sql(text) == (
        "SELECT 1 FROM runs WHERE principal IS NOT DISTINCT FROM %s AND name LIKE 'a%%'"
    )


def test_text_is_kept_as_each_database_can_hold_it() -> None:
    assert SQLITE.text("a\x00b") == "a\x00b"
    assert POSTGRES.text("a\x00b") == "a\ufffdb"


def test_a_row_is_decoded_by_its_column_names_in_whatever_order_they_are_selected() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE runs ({', '.join(reversed(RUN.names))})")
    conn.execute(
        "INSERT INTO runs (run_id, agent_id, session_id, status, started_at, attempt, metadata)"
        " VALUES ('R', 'a', 's', 'completed', 1.5, 2, '{\"k\": 1}')"
    )
    row = conn.execute(f"SELECT {RUN.select('r')} FROM runs AS r").fetchone()
    assert RUN.decode(row) == RunRecord(
        "R", "a", "s", status="completed", metadata={"k": 1}, started_at=1.5, attempt=2
    )


def test_a_given_value_replaces_a_columns_before_it_is_read() -> None:
    row = [1, "a", "s", "R", "user", "hi", None, "2024-01-01 00:00:00", None]
    row += [None, None, None, 0, None, None, 1]
    entry = HISTORY.decode(row, metadata='{"status": "completed"}')
    assert isinstance(entry, HistoryEntry)
    assert entry.metadata == {"status": "completed"}
    assert entry.created_at == 1704067200.0  # the original system's text dates, as UTC


def test_a_free_lease_row_decodes_to_none() -> None:
    row = (3, None, None, None, None, "", None, None, None)
    assert LEASE.decode(row, key="k", now=0.0) is None


def test_importing_the_toolkit_registers_nothing() -> None:
    assert not [name for name in dir(sqlkit) if name.startswith("soulacy_")]
