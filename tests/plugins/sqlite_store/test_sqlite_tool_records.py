"""Schema 10: a turn's tool record kept in its tool result's history row (decision 0047)."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import RunRecord, StorageError, ToolRecord
from soulacy.plugins.proofkit import make_proof
from soulacy.plugins.sqlite_store import SQLiteStore, _schema
from soulacy.plugins.sqlite_store._schema import migrate
from soulacy.plugins.sqlite_store._store import _TOOL_RECORDS

HERE = Path(__file__).parent
V9_DUMP = HERE / "v9_store.sql"  # made by make_v9_fixture.py, schema-9 code
V9_READ = HERE / "v9_store.json"  # what the schema-9 code read from it


def v9_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(V9_DUMP.read_text())
    conn.close()
    return path


def _fixture_reader() -> Callable[[SQLiteStore], Any]:
    spec = importlib.util.spec_from_file_location("make_v9_fixture", HERE / "make_v9_fixture.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read  # type: ignore[no-any-return]


def _count(path: Path, table: str) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def turn(call_id: str, content: str, name: str = "step") -> list[Message]:
    call = ToolCall(call_id, name, {"id": call_id})
    return [
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", content, tool_call_id=call_id, name=name),
    ]


def record(run_id: str, call_id: str, content: str, name: str = "step") -> ToolRecord:
    return ToolRecord(run_id, call_id, name, {"id": call_id}, content, False, 1.0)


def receipt(run_id: str, call_id: str) -> ToolRecord:
    return ToolRecord(run_id, f"approval:{call_id}", "approval", {"call_id": call_id}, "{}", False)


def _ids(records: dict[str, ToolRecord]) -> list[str]:
    return list(records)


async def _proof_of(store: SQLiteStore, run_id: str, records: Sequence[ToolRecord]) -> None:
    proof = await store.finalize_proof(run_id, {"status": "completed"})
    assert proof.sha256 == make_proof(run_id, {"status": "completed"}, records).sha256


async def test_a_schema_9_file_reads_the_same_after_its_migration(tmp_path: Path) -> None:
    path = v9_database(tmp_path / "soulacy.db")
    apart = _count(path, "tool_records")
    store = SQLiteStore(path)
    try:
        assert await store.open() == 9
        read = _fixture_reader()
        assert json.loads(json.dumps(await read(store))) == json.loads(V9_READ.read_text())
        # The crashed run goes on (a retry): its recorded call replays, its next ones follow.
        crashed = await store.start_run(RunRecord("crashed", "agent", "s1", "u", "bob"))
        assert crashed.attempt == 2
        replayed = await store.load_tool_records("crashed")
        assert [(r.call_id, r.content) for r in replayed.values()] == [("c0", "bob-0")]
        new = [receipt("crashed", "c1"), record("crashed", "c1", "bob-1")]
        await store.record_turn(crashed, turn("c1", "bob-1"), new)
        records = await store.load_tool_records("crashed")
        assert _ids(records) == ["c0", "approval:c1", "c1"]
        await _proof_of(store, "crashed", list(records.values()))
        assert _ids(await store.load_tool_records("done")) == ["c0", "approval:c1", "c1"]
    finally:
        await store.aclose()
    assert _count(path, "tool_records") == apart + 1  # the receipt; c1 is in its history row


async def test_a_schema_9_file_read_only_reads_the_same_and_stays_schema_9(
    tmp_path: Path,
) -> None:
    path = v9_database(tmp_path / "soulacy.db")
    dump = _dump(path)
    store = SQLiteStore(path, read_only=True)
    try:
        read = _fixture_reader()
        assert json.loads(json.dumps(await read(store))) == json.loads(V9_READ.read_text())
        assert store.migrated_from == 9
    finally:
        await store.aclose()
    assert _dump(path) == dump


async def test_a_failed_migration_to_10_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = v9_database(tmp_path / "soulacy.db")
    dump = _dump(path)

    def fail_halfway(conn: sqlite3.Connection) -> None:
        _schema._v10(conn)  # every column added, then the disk fails
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(_schema, "MIGRATIONS", (*_schema.MIGRATIONS[:-1], fail_halfway))
    store = SQLiteStore(path)
    with pytest.raises(StorageError, match="disk I/O error"):
        await store.open()
    await store.aclose()
    assert _dump(path) == dump  # user_version 9, no column added


async def test_a_turn_keeps_its_tool_record_in_its_tool_result_row(tmp_path: Path) -> None:
    path = tmp_path / "soulacy.db"
    store = SQLiteStore(path)
    try:
        run = await store.start_run(RunRecord("r", "agent", "s", "u", "alice"))
        # The message carries a progress warning the record does not.
        tool = record("r", "c0", "ok")
        await store.record_turn(run, [Message("user", "go"), *turn("c0", "ok\n\nwarned")], [tool])
        await store.record_turn(run, turn("c1", "same"), [record("r", "c1", "same")])
        records = await store.load_tool_records("r")
        assert records == {"c0": tool, "c1": record("r", "c1", "same")}
        assert [m.content for m in await store.load_history("agent", "s", "alice", "u")] == [
            "go",
            "",
            "ok\n\nwarned",
            "",
            "same",
        ]
    finally:
        await store.aclose()
    assert _count(path, "tool_records") == 0
    conn = sqlite3.connect(path)
    try:
        held = conn.execute(
            "SELECT id, record_arguments, record_content FROM conversation_history"
            " WHERE record_arguments IS NOT NULL ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    assert held == [(3, '{"id": "c0"}', "ok"), (5, '{"id": "c1"}', None)]  # content once


async def test_one_call_order_runs_through_history_rows_and_records_kept_apart(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        run = await store.start_run(RunRecord("r", "agent", "s"))
        await store.record_turn(run, turn("a", "A"), [record("r", "a", "A")])
        # An approval receipt, then the approved call: one turn.
        await store.record_turn(run, turn("b", "B"), [receipt("r", "b"), record("r", "b", "B")])
        # Two calls in one turn, a receipt between them.
        both = [*turn("c", "C"), Message("tool", "E", tool_call_id="e", name="step")]
        await store.record_turn(
            run, both, [record("r", "c", "C"), receipt("r", "e"), record("r", "e", "E")]
        )
        # Records without their message (a denied call's receipt, a record of its own turn).
        await store.record_turn(run, [], [receipt("r", "f"), record("r", "g", "G")])
        await store.record_turn(run, turn("h", "H"), [record("r", "h", "H")])
        records = await store.load_tool_records("r")
        order = ["a", "approval:b", "b", "c", "approval:e", "e", "approval:f", "g", "h"]
        assert _ids(records) == order
        await _proof_of(store, "r", list(records.values()))
    finally:
        await store.aclose()


async def test_the_first_record_of_a_call_id_wins_wherever_it_is_kept(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        run = await store.start_run(RunRecord("r", "agent", "s"))
        await store.record_turn(run, turn("c", "first"), [record("r", "c", "first")])
        await store.record_turn(run, turn("c", "second"), [record("r", "c", "second")])
        await store.record_turn(run, [], [record("r", "d", "apart")])  # kept apart
        await store.record_turn(run, turn("d", "held"), [record("r", "d", "held")])
        records = await store.load_tool_records("r")
        assert {k: r.content for k, r in records.items()} == {"c": "first", "d": "apart"}
        proof = await store.finalize_proof("r", {"status": "completed"})
        assert proof.receipts == 2
    finally:
        await store.aclose()


async def test_a_retry_replays_the_records_of_earlier_attempts(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        run = await store.start_run(RunRecord("r", "agent", "s"))
        await store.record_turn(run, turn("c0", "ok"), [record("r", "c0", "ok")])
        other = await store.start_run(RunRecord("x", "agent", "s"))  # later entries of another
        await store.record_turn(other, turn("c1", "x"), [record("x", "c1", "x")])
        retry = await store.start_run(RunRecord("r", "agent", "s"))
        assert retry.attempt == 2
        assert _ids(await store.load_tool_records("r")) == ["c0"]
        await store.record_turn(retry, turn("c1", "ok"), [record("r", "c1", "ok")])
        assert _ids(await store.load_tool_records("r")) == ["c0", "c1"]
        assert _ids(await store.load_tool_records("x")) == ["c1"]
    finally:
        await store.aclose()


async def test_a_turn_written_by_another_store_on_the_file_is_held_and_found(
    tmp_path: Path,
) -> None:
    path = tmp_path / "soulacy.db"
    first, second = SQLiteStore(path), SQLiteStore(path)  # two processes on one file
    try:
        run = await first.start_run(RunRecord("r", "agent", "s"))
        await first.record_turn(run, turn("a", "A"), [record("r", "a", "A")])
        # A takeover: the second never started the run, it reads the run's row at its turn.
        await second.record_turn(run, turn("b", "B"), [receipt("r", "c"), record("r", "b", "B")])
        await first.record_turn(run, turn("c", "C"), [record("r", "c", "C")])
        for store in (first, second):
            assert _ids(await store.load_tool_records("r")) == ["a", "approval:c", "b", "c"]
    finally:
        await first.aclose()
        await second.aclose()
    assert _count(path, "tool_records") == 1  # the receipt


async def test_two_principals_never_read_each_others_records(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        alice = await store.start_run(RunRecord("ra", "agent", "s", "u", "alice"))
        bob = await store.start_run(RunRecord("rb", "agent", "s", "u", "bob"))
        await store.record_turn(alice, turn("c", "alice's"), [record("ra", "c", "alice's")])
        await store.record_turn(bob, turn("c", "bob's"), [record("rb", "c", "bob's")])
        # Written with a record naming another owner than the run's: kept apart, still the
        # run's own (never found through bob's conversation).
        await store.record_turn(
            RunRecord("ra", "agent", "s", "u", "bob"), turn("d", "odd"), [record("ra", "d", "odd")]
        )
        # A record of another run passed in a turn: that run's, not this one's.
        await store.record_turn(alice, turn("e", "mixed"), [record("rb", "e", "mixed")])
        a = await store.load_tool_records("ra")
        b = await store.load_tool_records("rb")
        assert {k: r.content for k, r in a.items()} == {"c": "alice's", "d": "odd"}
        assert {k: r.content for k, r in b.items()} == {"c": "bob's", "e": "mixed"}
    finally:
        await store.aclose()


async def test_a_run_never_started_keeps_its_records_apart(tmp_path: Path) -> None:
    path = tmp_path / "soulacy.db"
    store = SQLiteStore(path)
    try:
        await store.record_turn(
            RunRecord("lone", "agent", "s"), turn("c", "ok"), [record("lone", "c", "ok")]
        )
        assert _ids(await store.load_tool_records("lone")) == ["c"]
    finally:
        await store.aclose()
    assert _count(path, "tool_records") == 1


def test_a_runs_records_are_read_through_the_history_index(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    migrate(conn)
    plan = " | ".join(
        str(r[-1])
        for r in conn.execute(
            f"EXPLAIN QUERY PLAN {_TOOL_RECORDS}", (None,) * _TOOL_RECORDS.count("?")
        )
    )
    conn.close()
    assert "USING INDEX history_by_owner (session_id=? AND agent_id=? AND principal=?" in plan
    assert "id>?" in plan, plan
    assert "USING INDEX sqlite_autoindex_tool_records_1 (run_id=?)" in plan, plan
