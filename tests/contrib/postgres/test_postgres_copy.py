"""``soulacy store copy``: a SQLite workspace's data, copied into PostgreSQL, read back the same.

The SQLite side is written by real runs (the kernel with the builtin SQLite store): a classic
run with a tool call, retried under its run id (attempt 2, a superseded proof), a workflow run
with checkpoints, and, through the store, a crashed run, a run still running, plugin state,
counters and a cancellation request. After the copy both stores are read through the Store
protocol, and every answer must be the same.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import psycopg
from psycopg.conninfo import make_conninfo

from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel import Kernel
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    ConversationKey,
    HistoryEntry,
    LeaseOwner,
    RunRecord,
    Store,
    ToolRecord,
)
from soulacy.plugins.sqlite_store import SCHEMA_VERSION as SQLITE_SCHEMA
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import Workspace

PLUGIN = "soulacy.contrib.postgres"
SECRET = "copy-s3cret-Pw"
ENV = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"}
LEGACY_SQL = Path(__file__).parents[2] / "plugins" / "sqlite_store" / "legacy_v1.sql"
V9_SQL = Path(__file__).parents[2] / "plugins" / "sqlite_store" / "v9_store.sql"  # schema-9 code's

TOOLS_PY = '''
def look(name: str) -> str:
    """Looks at something."""
    return f"saw {name}"


def fetch(city: str) -> dict:
    """Fetch a city's readings."""
    return {"city": city, "readings": [12.5, 14.0]}


def publish(title: str) -> dict:
    """Publish."""
    return {"published": True, "title": title}
'''


def with_password(dsn: str) -> str:
    """The DSN with a password (the embedded server trusts local users: it is not checked)."""
    return make_conninfo(dsn, password=SECRET)


def agents(workspace: Workspace) -> None:
    workspace.scripted_agent(
        "a",
        [{"tool": "look", "arguments": {"name": "sky"}, "id": "c1"}, {"text": "it is blue"}],
        tools=["tools.py:look"],
        repeat=True,
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(TOOLS_PY)
    workspace.scripted_agent(
        "wf",
        [{"text": "unused"}],
        tools=["tools.py:fetch", "tools.py:publish"],
        workflow={
            "steps": [
                {"id": "fetch", "tool": "fetch", "arguments": {"city": "{input}"}},
                {"id": "publish", "tool": "publish", "arguments": {"title": "{input}"}},
            ]
        },
        outcome={"assertions": [{"target": "steps.fetch.result.readings", "op": "exists"}]},
    )
    (workspace.path / "agents" / "wf" / "tools.py").write_text(TOOLS_PY)


def gone_owner() -> LeaseOwner:
    """An owner on this host whose process has exited (reaped): provably gone."""
    child = subprocess.Popen(["true"])
    child.wait()
    return attrs.evolve(LeaseOwner.current("crashed-kernel"), pid=child.pid)


async def fill(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> SQLiteStore:
    """A SQLite workspace with real runs in it; returns its store, closed."""
    agents(workspace)
    kernel = make_kernel()
    try:
        first = await kernel.run("a", "what colour?", session_id="S1", run_id="R1")
        assert first.status == "completed"
        retry = await kernel.run("a", "what colour?", session_id="S1", run_id="R1")
        assert (retry.status, retry.attempt) == ("completed", 2)
        other = await kernel.run(
            "a", "and now?", session_id="S2", run_id="R2", user_id="u1", principal="key-1"
        )
        assert other.status == "completed"
        flow = await kernel.run("wf", "Oslo", session_id="S3", run_id="W1")
        assert (flow.status, flow.verification) == ("completed", "verified")
        again = await kernel.run("wf", "Oslo", session_id="S3", run_id="W1")  # restored steps
        assert (again.status, again.attempt) == ("completed", 2)

        store = kernel.store()
        assert isinstance(store, SQLiteStore)
        # A run that crashed mid-turn: its owner's process is gone, its lease never released.
        crashed_key = ConversationKey("a", "S4").lease_key()
        grant = await store.acquire_lease(crashed_key, gone_owner(), 3600, holder="R3")
        assert grant.lease is not None
        started = await store.start_run(RunRecord("R3", "a", "S4"), fence=grant.lease)
        await store.record_turn(started, [Message("user", "hello\x00there")], [], grant.lease)
        # A run still running: this process holds its lease.
        live_key = ConversationKey("a", "S5").lease_key()
        live = await store.acquire_lease(live_key, LeaseOwner.current("me"), 3600, holder="R4")
        assert live.lease is not None
        await store.start_run(RunRecord("R4", "a", "S5"), fence=live.lease)
        await store.save_state("schedule:nightly", {"last_tick": "2026-01-01T07:00:00+00:00"})
        assert await store.spend("cost:2026-01-01", 1.25) == 1.25
        await store.request_cancel("not needed", run_id="R4")
        assert (await store.get_run("R3")).status == "interrupted"  # type: ignore[union-attr]
    finally:
        await kernel.aclose()
    return store


def sqlite_rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute(query).fetchall())
    finally:
        conn.close()


def pg_rows(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(query, args).fetchall())


def as_postgres(entries: list[HistoryEntry]) -> list[HistoryEntry]:
    """PostgreSQL's text holds no NUL: the store (and the copy) keep each as U+FFFD."""
    return [attrs.evolve(e, content=e.content.replace("\x00", "\ufffd")) for e in entries]


async def assert_same(source: Path, one: Store, two: Store) -> None:
    """Every read of the Store protocol answers the same on both stores (``one`` SQLite's)."""
    conversations = sqlite_rows(
        source,
        "SELECT DISTINCT agent_id, session_id, principal, user_id FROM conversation_history",
    )
    assert conversations
    for agent_id, session_id, principal, user_id in conversations:
        for args in ((session_id,), (session_id, agent_id), (session_id, agent_id, principal)):
            assert as_postgres(await one.history(*args)) == await two.history(*args), args
        assert await one.history(session_id, None, EVERY_PRINCIPAL) != []
        loaded = [
            attrs.evolve(m, content=m.content.replace("\x00", "\ufffd"))
            for m in await one.load_history(agent_id, session_id, principal, user_id)
        ]
        assert loaded == await two.load_history(agent_id, session_id, principal, user_id)

    def order(run: RunRecord) -> tuple[float, str]:
        return (-run.started_at, run.run_id)

    listed = await one.list_runs(limit=1000)
    assert sorted(listed, key=order) == sorted(await two.list_runs(limit=1000), key=order)
    assert sorted(await one.list_runs(2, "wf"), key=order) == sorted(
        await two.list_runs(2, "wf"), key=order
    )
    run_ids = [r[0] for r in sqlite_rows(source, "SELECT run_id FROM runs")]
    assert len(run_ids) == len(listed) == 5
    for run_id in run_ids:
        assert await one.get_run(run_id) == await two.get_run(run_id), run_id
        assert await one.load_tool_records(run_id) == await two.load_tool_records(run_id)
        proof = await one.get_proof(run_id)
        assert proof == await two.get_proof(run_id), run_id
        if proof is not None:
            assert hashlib.sha256(proof.body.encode()).hexdigest() == proof.sha256
        assert await one.load_checkpoints(run_id) == await two.load_checkpoints(run_id)
    for (key,) in sqlite_rows(source, "SELECT key FROM plugin_state"):
        assert await one.load_state(key) == await two.load_state(key)
    for (key,) in sqlite_rows(source, "SELECT key FROM leases"):
        mine, theirs = await one.get_lease(key), await two.get_lease(key)
        assert mine == theirs, key
    for (key,) in sqlite_rows(source, "SELECT key FROM counters"):
        assert await one.counter(key) == await two.counter(key)


def copy(
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    workspace: Workspace,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    return soulacy_cli(
        ["-p", PLUGIN, "store", "copy", *args], cwd=workspace.path, env={**ENV, **(env or {})}
    )


async def test_a_workspace_copied_into_postgres_reads_the_same_and_goes_on(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    sqlite_store = await fill(workspace, make_kernel)
    source = workspace.path / "soulacy.db"
    target = with_password(database)

    copied = copy(soulacy_cli, workspace, "--to", target, "--json")
    assert copied.returncode == 0, copied.stderr
    assert SECRET not in copied.stdout + copied.stderr
    report = json.loads(copied.stdout)
    assert report["source"] == str(source)
    assert report["schema_version"] == SQLITE_SCHEMA
    assert report["target_migrated_from"] == 0
    expected = {
        table: sqlite_rows(source, f"SELECT COUNT(*) FROM {table}")[0][0]
        for table in (
            "runs",
            "attempt_endings",
            "conversation_history",
            "tool_records",
            "proofs",
            "superseded_proofs",
            "workflow_checkpoints",
            "plugin_state",
            "leases",
            "lease_high_water",
            "counters",
            "tool_approvals",
        )
    }
    # Tool records as the store reads them: kept in their tool results' history entries, or
    # apart in tool_records (SQLite schema 10); one row each in PostgreSQL.
    expected["tool_records"] = sum(
        [
            len(await sqlite_store.load_tool_records(r))
            for (r,) in sqlite_rows(source, "SELECT run_id FROM runs")
        ]
    )
    assert expected["tool_records"] == 4  # R1's two attempts, R2's and W1's first (each one)
    assert report["copied"] == expected
    assert expected["superseded_proofs"] == 2  # R1's and W1's first attempts
    assert expected["attempt_endings"] == 2  # their endings, read by their entries
    assert expected["workflow_checkpoints"] == 2
    assert report["left_out"] == {"lease_waiters": 0, "cancel_requests": 1, "run_events": 0}
    assert report["running"] == ["R4"]  # its process (this one) still holds its lease
    assert report["unverified_proofs"] == []
    assert "R4" in copied.stderr  # warned: what it writes from now on is not copied

    pg_store = PostgresStore(database)
    try:
        await assert_same(source, sqlite_store, pg_store)
        crashed = await pg_store.get_run("R3")
        assert crashed is not None
        assert crashed.status == "interrupted"  # the same judgement, by the copied lease
        assert (await pg_store.history("S4"))[0].content == "hello\ufffdthere"  # NUL: U+FFFD
        attempts = await pg_store.history("S1")
        assert {e.attempt for e in attempts} == {1, 2}
        # Superseded proofs are not read through the protocol: compare the rows themselves.
        query = (
            "SELECT run_id, sha256, body, receipts, created_at, superseded_at"
            " FROM superseded_proofs ORDER BY run_id, created_at"
        )
        superseded = sqlite_rows(source, query)
        assert [tuple(r) for r in pg_rows(database, query)] == superseded
        for _, sha, body, *_ in superseded:
            assert hashlib.sha256(body.encode()).hexdigest() == sha
        last_id = max(e.id for e in attempts)
        top_token = sqlite_rows(source, "SELECT MAX(token) FROM leases")[0][0]
    finally:
        await pg_store.aclose()
        await sqlite_store.aclose()

    # The workspace goes on in PostgreSQL: the conversation continues after its copied entries,
    # and the conversation's lease grants a token above every one the file granted.
    workspace.write_config(f"plugins:\n  enable: [{PLUGIN}]\npostgres: {{dsn: '{database}'}}\n")
    kernel = make_kernel()
    try:
        result = await kernel.run("a", "once more", session_id="S1", run_id="R9")
        assert result.status == "completed"
        entries = await kernel.store().history("S1")
        assert [e.run_id for e in entries[-4:]] == ["R9"] * 4
        assert min(e.id for e in entries[-4:]) > last_id
        (token,) = pg_rows(
            database,
            "SELECT token FROM leases WHERE key = %s",
            ConversationKey("a", "S1").lease_key(),
        )[0]
        assert token == 3 > 2  # R1 took it twice in SQLite; R9 is the third grant
        assert top_token >= 2
    finally:
        await kernel.aclose()
    assert not (workspace.path / "soulacy.db-shm").exists()  # the copy created no file

    # A second copy into the same database is refused, and changes nothing.
    before = pg_rows(database, "SELECT COUNT(*) FROM conversation_history")
    again = copy(soulacy_cli, workspace, "--to", target)
    assert again.returncode == 2
    assert "is not empty (rows: leases" in again.stderr
    assert "Nothing was copied: copy into a new database" in again.stderr
    assert SECRET not in again.stdout + again.stderr
    assert pg_rows(database, "SELECT COUNT(*) FROM conversation_history") == before


def test_the_text_report_names_what_was_copied_and_the_dsn_comes_from_the_environment(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    agents(workspace)
    ran = soulacy_cli(["run", "a", "hi", "--session", "S"], cwd=workspace.path, env=ENV)
    assert ran.returncode == 0, ran.stderr
    (workspace.path / "elsewhere").mkdir()
    moved = workspace.path / "elsewhere" / "old.db"
    (workspace.path / "soulacy.db").rename(moved)
    env = {"SOULACY_POSTGRES__DSN": with_password(database)}
    missing = copy(soulacy_cli, workspace, env=env)
    assert missing.returncode == 2
    assert f"no SQLite store at {workspace.path / 'soulacy.db'}" in missing.stderr
    done = copy(soulacy_cli, workspace, "--from", "elsewhere/old.db", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"copied {moved} (SQLite, schema version {SQLITE_SCHEMA}) into postgresql://"
    )
    # one more than before the effect ledger: the reservation of its tool call (plugin state)
    assert "in one transaction: 9 rows" in lines[0]
    assert SECRET not in done.stdout + done.stderr
    counts = {line.rsplit(maxsplit=1)[0].strip(): line.split()[-1] for line in lines[1:4]}
    assert counts == {"runs": "1", "history entries": "4", "tool records": "1"}
    assert pg_rows(database, "SELECT role FROM conversation_history ORDER BY id") == [
        ("user",),
        ("assistant",),
        ("tool",),
        ("assistant",),
    ]


def store_file(workspace: Workspace, dump: Path) -> Path:
    """A workspace whose store file is made from an SQL dump (an older schema's)."""
    workspace.write_config("")
    path = workspace.path / "soulacy.db"
    conn = sqlite3.connect(path)
    conn.executescript(dump.read_text())
    conn.close()
    return path


async def test_an_older_file_is_refused_until_the_sqlite_store_migrated_it(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    path = store_file(workspace, LEGACY_SQL)
    refused = copy(soulacy_cli, workspace, "--to", database)
    assert refused.returncode == 2
    assert f"is of schema version 0; the copy reads version {SQLITE_SCHEMA} only" in refused.stderr
    assert "`soulacy runs cancel none`" in refused.stderr
    assert pg_rows(database, "SELECT to_regclass('runs') IS NULL") == [(True,)]  # untouched

    # What the message says to do, then the copy; the original system's rows read the same.
    migrated = soulacy_cli(["runs", "cancel", "none"], cwd=workspace.path, env=ENV)
    assert "no running run 'none'" in migrated.stderr
    assert sqlite_rows(path, "PRAGMA user_version") == [(SQLITE_SCHEMA,)]
    done = copy(soulacy_cli, workspace, "--to", database)
    assert done.returncode == 0, done.stderr
    assert "not copied" not in done.stdout
    sqlite_store, pg_store = SQLiteStore(path, read_only=True), PostgresStore(database)
    try:
        old = await pg_store.history("old-session")
        assert [(e.role, e.created_at) for e in old] == [
            ("user", 1772359200.0),  # 2026-03-01 10:00:00 UTC, from the original's text
            ("assistant", 1772359202.0),
        ]
        assert old == await sqlite_store.history("old-session")
        (checkpoint,) = await pg_store.load_checkpoints("old-run")
        assert (checkpoint.evidence, checkpoint.identity) == ({"result": {"x": 1}}, None)
        assert [checkpoint] == await sqlite_store.load_checkpoints("old-run")
    finally:
        await sqlite_store.aclose()
        await pg_store.aclose()


def test_a_file_that_is_not_a_soulacy_store_is_refused(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    workspace.write_config("")
    conn = sqlite3.connect(workspace.path / "other.db")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    refused = copy(soulacy_cli, workspace, "--to", database, "--from", "other.db")
    assert refused.returncode == 2
    assert "is not a Soulacy store" in refused.stderr
    bad = copy(soulacy_cli, workspace, "--to", f"host=h password={SECRET} nonsense")
    assert bad.returncode == 2
    assert "--to: not a PostgreSQL connection string" in bad.stderr
    assert SECRET not in bad.stderr + bad.stdout


def test_a_copy_that_fails_half_way_leaves_the_target_empty(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    agents(workspace)
    ran = soulacy_cli(["run", "a", "hi", "--session", "S"], cwd=workspace.path, env=ENV)
    assert ran.returncode == 0, ran.stderr
    conn = sqlite3.connect(workspace.path / "soulacy.db")
    with conn:  # a count PostgreSQL's INTEGER cannot hold, in the last history row
        conn.execute("UPDATE conversation_history SET tokens = ? WHERE id = 4", (2**40,))
    conn.close()
    failed = copy(soulacy_cli, workspace, "--to", with_password(database))
    assert failed.returncode == 1
    assert "copy failed: a value the database refused" in failed.stderr
    assert SECRET not in failed.stderr + failed.stdout
    assert "Traceback" not in failed.stderr
    # The runs were copied before the history failed: rolled back with it, all or nothing.
    for table in ("runs", "conversation_history", "leases"):
        assert pg_rows(database, f"SELECT COUNT(*) FROM {table}") == [(0,)]


async def test_tool_records_kept_in_both_places_are_copied_in_call_order(
    workspace: Workspace,
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    # A file of schema 9 (every record in tool_records), migrated, then written by schema 10:
    # records in tool results' history entries, receipts apart, a call id recorded twice.
    path = store_file(workspace, V9_SQL)

    def turn(call_id: str, content: str) -> list[Message]:
        call = ToolCall(call_id, "step", {"id": call_id})
        return [
            Message("assistant", "", tool_calls=(call,)),
            Message("tool", content, tool_call_id=call_id, name="step"),
        ]

    def record(run_id: str, call_id: str, content: str, name: str = "step") -> ToolRecord:
        return ToolRecord(run_id, call_id, name, {"id": call_id}, content, False, 5.0)

    store = SQLiteStore(path)
    try:
        crashed = await store.start_run(RunRecord("crashed", "agent", "s1", "u", "bob"))
        await store.record_turn(
            crashed,
            turn("c1", "bob-1\n\nwarned"),
            [record("crashed", "approval:c1", "{}", "approval"), record("crashed", "c1", "bob-1")],
        )
        await store.finish_run("crashed", {"status": "completed"})
        await store.finalize_proof("crashed", {"status": "completed"})
        fresh = await store.start_run(RunRecord("fresh", "agent", "s9", None, "alice"))
        await store.record_turn(fresh, turn("a", "A"), [record("fresh", "a", "A")])
        await store.record_turn(fresh, turn("a", "again"), [record("fresh", "a", "again")])
        await store.record_turn(fresh, [], [record("fresh", "approval:b", "{}", "approval")])
        await store.record_turn(fresh, turn("b", "B"), [record("fresh", "b", "B")])
        runs = [r.run_id for r in await store.list_runs(limit=10)]
        read = {run_id: await store.load_tool_records(run_id) for run_id in runs}
        assert list(read["crashed"]) == ["c0", "approval:c1", "c1"]
        assert list(read["fresh"]) == ["a", "approval:b", "b"]
    finally:
        await store.aclose()

    done = copy(soulacy_cli, workspace, "--to", database, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["copied"]["tool_records"] == sum(map(len, read.values())) == 10
    sqlite_store, pg_store = SQLiteStore(path, read_only=True), PostgresStore(database)
    try:
        for run_id in runs:
            assert await pg_store.load_tool_records(run_id) == read[run_id], run_id
            assert await pg_store.get_proof(run_id) == await sqlite_store.get_proof(run_id)
        stored = pg_rows(database, "SELECT run_id, call_id FROM tool_records ORDER BY seq")
        for run_id in runs:
            assert [c for r, c in stored if r == run_id] == list(read[run_id])
    finally:
        await sqlite_store.aclose()
        await pg_store.aclose()
