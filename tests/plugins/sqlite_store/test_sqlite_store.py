"""The SQLite store: conformance, migrations from older files, and faults surfaced."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Message
from soulacy.kernel.store import RunRecord, StorageError, ToolRecord
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.sqlite_store import SCHEMA_VERSION, SQLiteStore, _schema
from soulacy.plugins.sqlite_store._schema import migrate
from soulacy.testing import STORE_CHECK_NAMES, Workspace, check_store

LEGACY = Path(__file__).with_name("legacy_v1.sql")


@pytest.mark.parametrize("check", [name for name in STORE_CHECK_NAMES if name != "failures_raise"])
async def test_the_memory_store_passes_the_store_kit(check: str) -> None:
    await check_store(MemoryStore, only=check)


@pytest.mark.parametrize("check", STORE_CHECK_NAMES)
async def test_the_sqlite_store_passes_the_store_kit(check: str, tmp_path: Path) -> None:
    counter = iter(range(100))

    def failing() -> SQLiteStore:  # a file that is not a database: every call must raise
        path = tmp_path / f"not-a-db-{next(counter)}.db"
        path.write_bytes(b"this is not a database at all" * 100)
        return SQLiteStore(path)

    await check_store(
        lambda: SQLiteStore(tmp_path / f"kit-{next(counter)}.db"), failing=failing, only=check
    )


def legacy_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(LEGACY.read_text())
    conn.close()
    return path


async def test_a_database_of_the_original_system_upgrades_in_place(tmp_path: Path) -> None:
    path = legacy_database(tmp_path / "old.db")
    store = SQLiteStore(path)
    try:
        assert await store.open() == 0
        entries = await store.history("old-session")
        assert [(e.role, e.content, e.tokens) for e in entries] == [
            ("user", "What is the capital of Norway?", 8),
            ("assistant", "Oslo — ünïcødé intact.", 6),
        ]
        assert entries[0].created_at == pytest.approx(1772359200.0)  # 2026-03-01 10:00 UTC
        assert entries[0].metadata is None
        assert entries[0].run_id is None
        # New runs go into the same table, next to the old rows.
        run = RunRecord("r1", "helper", "old-session")
        await store.start_run(run)
        await store.record_turn(run, [Message("user", "and Sweden?")], [])
        await store.finish_run("r1", {"status": "completed", "verification": "unverified"})
        history = await store.history("old-session")
        assert len(history) == 3
        assert history[0].metadata is None  # old rows keep their text and no metadata
        assert history[2].metadata == {"status": "completed", "verification": "unverified"}
    finally:
        await store.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    checkpoint = conn.execute("SELECT step_id, state, status FROM workflow_checkpoints").fetchone()
    assert checkpoint == ("fetch", '{"x": 1}', "completed")
    conn.close()


@pytest.mark.parametrize("start", ["empty", "legacy", "current"])
def test_migrations_are_idempotent_from_every_earlier_version(tmp_path: Path, start: str) -> None:
    path = tmp_path / "db.sqlite"
    if start == "legacy":
        legacy_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    if start == "current":
        migrate(conn)
    before = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
    migrate(conn)
    schema = conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall()
    migrate(conn)
    assert conn.execute("SELECT sql FROM sqlite_master ORDER BY name").fetchall() == schema
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    columns = {r[1] for r in conn.execute("PRAGMA table_info(conversation_history)")}
    assert {"run_id", "metadata", "content", "subject"} <= columns
    assert before <= len(schema)
    conn.close()


async def test_wal_mode_and_the_default_file(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel()
    try:
        result = await kernel.run("a", "hello", session_id="s")
    finally:
        await kernel.aclose()
    path = workspace.path / "soulacy.db"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # The reply metadata is the run's, once (docs/decisions/0039): no entry holds a copy.
    rows = conn.execute(
        "SELECT h.role, h.content, h.metadata IS NULL, r.metadata IS NOT NULL"
        " FROM conversation_history AS h JOIN runs AS r USING (run_id)"
        " WHERE h.session_id = 's' ORDER BY h.id"
    ).fetchall()
    assert rows == [("user", "hello", 1, 1), ("assistant", "hi", 1, 1)]
    proof = conn.execute("SELECT sha256 FROM proofs WHERE run_id = ?", (result.run_id,))
    assert proof.fetchone()[0] == result.metadata()["proof"]["sha256"]
    conn.close()


async def test_history_and_status_survive_a_reopen(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"tool": "nope"}], repeat=True, max_turns=2)
    first = make_kernel()
    try:
        result = await first.run("a", "loop", session_id="s")
    finally:
        await first.aclose()
    assert result.status == "incomplete"
    second = make_kernel()
    try:
        entries = await second.store().history("s")
        run = await second.store().get_run(result.run_id)
    finally:
        await second.aclose()
    assert entries[-1].metadata is not None
    assert entries[-1].metadata["incomplete_reason"] == "max_turns"  # the notice survives
    assert run is not None
    assert (run.status, run.incomplete_reason) == ("incomplete", "max_turns")


async def test_a_replayed_call_id_survives_a_restart(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    (workspace.path / "count.txt").write_text("0")
    tools = workspace.path / "agents" / "a" / "t.py"
    workspace.scripted_agent(
        "a", [{"tool": "bump", "id": "c1"}, {"text": "ok"}], tools=["t.py:bump"]
    )
    tools.write_text(
        "from pathlib import Path\n"
        f"P = Path({str(workspace.path / 'count.txt')!r})\n"
        "def bump() -> int:\n"
        "    n = int(P.read_text()) + 1\n    P.write_text(str(n))\n    return n\n"
    )
    for _ in range(2):  # the same run id, in two kernels (a retry after a restart)
        kernel = make_kernel()
        try:
            result = await kernel.run("a", "bump", run_id="same-run", session_id="s")
        finally:
            await kernel.aclose()
        assert result.status == "completed"
    assert (workspace.path / "count.txt").read_text() == "1"


async def test_a_read_only_database_raises_a_storage_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "ro.db")
    await store.open()
    await store._read("make read-only", lambda conn: conn.execute("PRAGMA query_only = ON"))
    try:
        with pytest.raises(StorageError, match=r"record turn failed: .*readonly"):
            await store.record_turn(RunRecord("r", "a", "s"), [Message("user", "x")], [])
    finally:
        await store.aclose()


@pytest.mark.parametrize("read_only", [False, True])
async def test_a_file_of_a_newer_schema_is_refused_and_left_as_it_was(
    tmp_path: Path, read_only: bool
) -> None:
    path = tmp_path / "newer.db"
    store = SQLiteStore(path)
    await store.open()
    await store.record_turn(RunRecord("r", "a", "s"), [Message("user", "kept")], [])
    await store.aclose()
    with sqlite3.connect(path) as conn:  # what a later Soulacy would leave
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    newer = SQLiteStore(path, read_only=read_only)
    try:
        with pytest.raises(StorageError, match=rf"schema {SCHEMA_VERSION + 1}.*newer Soulacy"):
            await newer.load_history("a", "s")
    finally:
        await newer.aclose()
    assert path.read_bytes() == before


async def test_a_full_database_raises_a_storage_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "full.db")
    await store.open()
    await store._read("shrink", lambda conn: conn.execute("PRAGMA max_page_count = 1"))
    try:
        with pytest.raises(StorageError, match="full"):
            await store.record_turn(RunRecord("r", "a", "s"), [Message("user", "x" * 100_000)], [])
    finally:
        await store.aclose()


async def test_a_corrupt_file_is_an_error_not_an_empty_history(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"this is not a database at all" * 100)
    store = SQLiteStore(path)
    try:
        with pytest.raises(StorageError, match="file is not a database"):
            await store.load_history("a", "s")
    finally:
        await store.aclose()


async def test_a_locked_database_surfaces_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    store = SQLiteStore(path, busy_timeout=0.2)
    await store.open()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageError, match="database is locked"):
            await store.start_run(RunRecord("r", "a", "s"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        await store.aclose()


async def test_the_engine_reports_a_storage_failure_as_a_failed_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    (workspace.path / "soulacy.db").write_bytes(b"garbage" * 1000)
    kernel = make_kernel()
    try:
        result = await kernel.run("a", "hello")
    finally:
        await kernel.aclose()
    assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
    assert "file is not a database" in (result.error or "")


def test_a_proofs_table_of_the_original_system_is_kept_aside(tmp_path: Path) -> None:
    path = legacy_database(tmp_path / "old.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE proofs (id INTEGER PRIMARY KEY, subject TEXT, agent_id TEXT,"
        " run_id TEXT, proof TEXT, sha256 TEXT, UNIQUE(subject, agent_id, run_id))"
    )
    conn.execute(
        "INSERT INTO proofs (subject, agent_id, run_id, proof, sha256)"
        " VALUES ('alice', 'helper', 'old-run', '{}', 'abc')"
    )
    migrate(conn)
    assert conn.execute("SELECT sha256 FROM legacy_proofs").fetchall() == [("abc",)]
    columns = {r[1] for r in conn.execute("PRAGMA table_info(proofs)")}
    assert {"run_id", "sha256", "body", "receipts"} <= columns
    conn.close()


async def test_scripted_tool_arguments_arrive_as_plain_values(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    seen: list[type] = []

    def probe(word: str) -> str:
        """Records the type it got."""
        seen.append(type(word))
        return word

    from soulacy.kernel import Tool
    from soulacy.testing import throwaway_plugin

    workspace.scripted_agent(
        "a", [{"tool": "probe", "arguments": {"word": "quoted"}}, {"text": "ok"}], tools=["probe"]
    )
    script = workspace.path / "agents" / "a" / "script.yaml"
    script.write_text(script.read_text().replace("word: quoted", 'word: "quoted"'))
    tools = throwaway_plugin(
        "t", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(probe)]
    )
    kernel = make_kernel(extra_plugins=[tools], plugins=["no:sqlite_store"])
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert seen == [str]


# -- schema 9: one row per attempt for reply metadata, fewer pages per turn (decision 0039) ------

V8_DUMP = Path(__file__).with_name("v8_store.sql")  # made by make_v8_fixture.py, schema-8 code
V8_READ = Path(__file__).with_name("v8_store.json")  # what the schema-8 code read from it


def v8_database(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(V8_DUMP.read_text())
    conn.close()
    return path


def _fixture_reader() -> Callable[[SQLiteStore], Any]:
    spec = importlib.util.spec_from_file_location(
        "make_v8_fixture", Path(__file__).with_name("make_v8_fixture.py")
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read  # type: ignore[no-any-return]


def _rows(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    finally:
        conn.close()


async def test_a_schema_8_file_reads_the_same_after_its_migration(tmp_path: Path) -> None:
    path = v8_database(tmp_path / "soulacy.db")
    before = _rows(path)
    store = SQLiteStore(path)
    try:
        assert await store.open() == 8
        read = _fixture_reader()
        assert json.loads(json.dumps(await read(store))) == json.loads(V8_READ.read_text())
        # New ids follow the old ones, as AUTOINCREMENT gave them.
        retry = await store.start_run(RunRecord("again", "agent", "s2"))
        assert retry.attempt == 3
        tool = ToolRecord("again", "c9", "step", {}, "ok", False, 20.0)
        await store.record_turn(retry, [Message("user", "thrice")], [tool])
        await store.finish_run("running", {"status": "completed"})
        entries = {e.content: e for e in await store.history("s2")}
        assert entries["thrice"].id == 10
        assert entries["twice"].metadata == {"status": "interrupted", "attempt": 2}
        assert entries["once"].metadata == {"status": "incomplete", "run_id": "again"}
        assert entries["still going"].metadata == {"status": "completed"}
    finally:
        await store.aclose()
    after = _rows(path)
    assert after.pop("attempt_endings") == 3  # retried 1, again 1 (moved), again 2 (just now)
    assert after.pop("lease_high_water") == 0  # schema 12's: empty until a lease is pruned
    assert after == {**before, "conversation_history": 10, "runs": 4, "tool_records": 3}
    conn = sqlite3.connect(path)
    try:
        declarations = dict(
            conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE name IN"
                " ('conversation_history', 'tool_records')"
            ).fetchall()
        )
        assert len(declarations) == 2
        assert not any("AUTOINCREMENT" in sql.upper() for sql in declarations.values())
        assert conn.execute("SELECT MAX(seq) FROM tool_records").fetchone()[0] == 3
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index'"
                " AND tbl_name = 'conversation_history'"
            )
        }
        assert indexes == {"history_by_owner"}
        # Moved: only the entry whose metadata was its own keeps a copy.
        kept = conn.execute(
            "SELECT id, metadata FROM conversation_history WHERE metadata IS NOT NULL"
        ).fetchall()
        assert kept == [(2, '{"own": 1}')]
    finally:
        conn.close()


async def test_a_failed_migration_leaves_the_file_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = v8_database(tmp_path / "soulacy.db")
    conn = sqlite3.connect(path)
    dump = list(conn.iterdump())
    conn.close()
    rebuild = _schema._rebuild_without_autoincrement

    def fail_halfway(conn: sqlite3.Connection, table: str, *args: Any) -> None:
        rebuild(conn, table, *args)
        if table == "tool_records":  # the history table is rebuilt already
            raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(_schema, "_rebuild_without_autoincrement", fail_halfway)
    store = SQLiteStore(path)
    with pytest.raises(StorageError, match="disk I/O error"):
        await store.open()
    await store.aclose()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
        assert list(conn.iterdump()) == dump
    finally:
        conn.close()


async def test_finish_run_writes_one_row_whatever_the_run_length(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        run = await store.start_run(RunRecord("long", "agent", "s"))
        for n in range(50):
            await store.record_turn(run, [Message("user", f"m{n}")], [])
        conn = store._conn
        assert conn is not None
        changes = conn.total_changes
        await store.finish_run("long", {"status": "completed"})
        assert conn.total_changes - changes == 1  # the runs row; no history entry rewritten
        entries = await store.history("s")
        assert {json.dumps(e.metadata) for e in entries} == {'{"status": "completed"}'}
    finally:
        await store.aclose()


# Every query of the store on the history and tool records, and the index it must use.
_PLANS = {
    "load_history": (
        "SELECT h.id FROM conversation_history AS h LEFT JOIN runs AS r ON r.run_id = h.run_id"
        " WHERE h.session_id = ? AND h.agent_id = ? AND h.principal IS ? AND h.user_id IS ?"
        " ORDER BY h.id",
        "history_by_owner",
    ),
    "history of an agent": (
        "SELECT h.id FROM conversation_history AS h LEFT JOIN runs AS r ON r.run_id = h.run_id"
        " WHERE h.session_id = ? AND h.agent_id = ? ORDER BY h.id",
        "history_by_owner",
    ),
    "history of a session": (
        "SELECT h.id FROM conversation_history AS h LEFT JOIN runs AS r ON r.run_id = h.run_id"
        " WHERE h.session_id = ? AND h.principal IS ? ORDER BY h.id",
        "history_by_owner",
    ),
    "tool records": (
        "SELECT call_id FROM tool_records WHERE run_id = ? ORDER BY seq",
        "sqlite_autoindex_tool_records_1",
    ),
}


@pytest.mark.parametrize("query", sorted(_PLANS))
def test_every_history_read_uses_an_index(tmp_path: Path, query: str) -> None:
    conn = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    migrate(conn)
    sql, index = _PLANS[query]
    plan = " | ".join(
        str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", (None,) * sql.count("?"))
    )
    conn.close()
    assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, plan
    assert "SCAN h" not in plan, plan


async def test_finish_run_of_a_run_never_started_labels_its_entries(tmp_path: Path) -> None:
    # As schema 8 did (its UPDATE matched attempt 1 without a runs row), and the memory store.
    store = SQLiteStore(tmp_path / "soulacy.db")
    try:
        await store.record_turn(RunRecord("lone", "agent", "s"), [Message("user", "hi")], [])
        await store.finish_run("lone", {"status": "failed"})
        assert [e.metadata for e in await store.history("s")] == [{"status": "failed"}]
        assert await store.get_run("lone") is None
    finally:
        await store.aclose()


async def test_a_schema_8_file_read_only_reads_the_same_and_stays_schema_8(tmp_path: Path) -> None:
    path = v8_database(tmp_path / "soulacy.db")
    conn = sqlite3.connect(path)
    dump = list(conn.iterdump())
    conn.close()
    store = SQLiteStore(path, read_only=True)
    try:
        read = _fixture_reader()
        assert json.loads(json.dumps(await read(store))) == json.loads(V8_READ.read_text())
        assert store.migrated_from == 8  # migrated in memory only
    finally:
        await store.aclose()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
        assert list(conn.iterdump()) == dump
    finally:
        conn.close()
