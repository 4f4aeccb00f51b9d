"""Outages answer like outages: while the store fails (a real SQLite file made unreadable or
locked, a PostgreSQL database that refuses connections), routes answer 503 with Retry-After and
a JSON error naming the store, never a 500 or a traceback per request; ``/health`` stays
liveness and ``/ready`` reports the store, the same for every caller."""

from __future__ import annotations

import importlib.util
import logging
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import Server, keyed_config, open_keyed_server, open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

PATIENCE = 60.0  # seconds: the bound of every wait below; none takes it when things work
QUICK_STORE = "store: {busy_timeout: 100ms}\n"


def _outage_logs(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str]]:
    """(records with a traceback or at ERROR from the server, the server's warnings)."""
    server = [r for r in caplog.records if r.name.startswith(("soulacy.http", "hypercorn"))]
    noisy = [r.getMessage() for r in server if r.exc_info or r.levelno >= logging.ERROR]
    noisy += [r.getMessage() for r in server if "Traceback" in r.getMessage()]
    warnings = [r.getMessage() for r in server if r.levelno == logging.WARNING]
    return noisy, warnings


async def _until(client: httpx.AsyncClient, path: str, status: int) -> httpx.Response:
    """GET ``path`` until it answers ``status`` (``/ready`` reuses a check for a second)."""
    with trio.fail_after(PATIENCE):
        while True:
            response = await client.get(path)
            if response.status_code == status:
                return response
            await trio.sleep(0.05)


def _assert_store_unavailable(response: httpx.Response, name: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["status"] == 503
    assert body["store"] == {"name": name, "available": False}
    assert name in body["error"]


# -- SQLite ----------------------------------------------------------------------------------


def _store_files(workspace: Workspace) -> list[Path]:
    db = workspace.path / "soulacy.db"
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


@contextmanager
def unreadable_store(workspace: Workspace) -> Iterator[None]:
    """The store's files overwritten in place (the same inodes, which the server's connection
    holds open): every read and write fails ("file is not a database"). Taken while holding
    the write lock, so that no write of the server is half-copied; put back on exit."""
    holder = sqlite3.connect(workspace.path / "soulacy.db", timeout=30, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    saved = {p: p.read_bytes() for p in _store_files(workspace) if p.exists()}
    for path, data in saved.items():
        with path.open("r+b") as out:
            out.write(b"\x5a" * len(data))
    holder.close()
    try:
        yield
    finally:
        for path, data in saved.items():
            with path.open("r+b") as out:
                out.write(data)


@contextmanager
def write_locked_store(workspace: Workspace) -> Iterator[None]:
    """Another connection holds the write lock: the store reads, but every write it tries
    fails once ``store.busy_timeout`` has passed ("database is locked")."""
    holder = sqlite3.connect(workspace.path / "soulacy.db", timeout=30, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.fixture
async def server(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> AsyncIterator[Server]:
    async with open_keyed_server(workspace, make_kernel, QUICK_STORE) as running:
        yield running


async def _chat(client: httpx.AsyncClient, run_id: str, session_id: str) -> dict[str, Any]:
    body = {"agent_id": "echo", "text": "hi", "run_id": run_id, "session_id": session_id}
    answered = await client.post("/chat", json=body)
    assert answered.status_code == 200, answered.text
    result: dict[str, Any] = answered.json()
    return result


async def test_routes_answer_503_naming_the_store_while_it_is_unreadable(
    server: Server, workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with server.client("alice") as alice, server.client("bob") as bob:
        await _chat(alice, "alice-run", "alice-session")
        await _chat(bob, "bob-run", "bob-session")
        assert (await alice.get("/ready")).status_code == 200
        with unreadable_store(workspace):
            assert (await alice.get("/health")).json() == {"status": "ok"}  # liveness
            ready = await _until(alice, "/ready", 503)
            assert ready.headers["retry-after"] == "5"
            assert ready.json()["store"] == {
                "name": "sqlite_store",
                "available": False,
                "failed": "read",
            }
            for path in ("/runs/alice-run", "/history/alice-session", "/runs"):  # /runs: portal
                _assert_store_unavailable(await alice.get(path), "sqlite_store")
            chat = await alice.post("/chat", json={"agent_id": "echo", "text": "hi"})
            _assert_store_unavailable(chat, "sqlite_store")
            # bob learns nothing of alice's run: the same answer as for a run that never was.
            theirs, none = await bob.get("/runs/alice-run"), await bob.get("/runs/no-such-run")
            _assert_store_unavailable(theirs, "sqlite_store")
            assert theirs.json() == none.json()
            assert str(workspace.path) not in theirs.text + ready.text  # no file names
        await _until(alice, "/ready", 200)  # the files put back: ready again
        record = await alice.get("/runs/alice-run")
        assert record.status_code == 200, record.text
        assert record.json()["status"] == "completed"
    noisy, warnings = _outage_logs(caplog)
    assert noisy == []  # no traceback, no error: an outage is no bug
    assert len([w for w in warnings if "sqlite_store" in w]) == 1  # one warning, not one each


async def test_a_chat_whose_run_the_store_refused_is_a_503_and_its_retry_completes(
    server: Server, workspace: Workspace
) -> None:
    async with server.client("alice") as alice:
        old = await _chat(alice, "alice-old", "alice-session")
        with write_locked_store(workspace):
            ready = await _until(alice, "/ready", 503)
            # It reads, but its writes fail (after busy_timeout) or wait: it is not ready.
            assert ready.json()["store"]["failed"] in ("write", "time")
            # Reads still work: a run stored before is served.
            assert (await alice.get(f"/runs/{old['run_id']}")).status_code == 200
            body = {"agent_id": "echo", "text": "hi", "run_id": "alice-new", "session_id": "s2"}
            refused = await alice.post("/chat", json=body)
            _assert_store_unavailable(refused, "sqlite_store")
            assert refused.json()["run_id"] == "alice-new"
            assert "alice-new" in refused.json()["error"]  # retry it under its run id
        await _until(alice, "/ready", 200)
        retried = await alice.post("/chat", json=body)
        assert retried.status_code == 200, retried.text
        assert retried.json()["status"] == "completed"


async def test_ready_answers_while_the_store_does_not(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """A store call cannot be abandoned: with a long ``busy_timeout``, a write waits for the
    lock as long as another connection holds it. ``/ready`` says "not ready" meanwhile, and
    ``/health`` answers, rather than both hanging with the store."""
    waits = "store: {busy_timeout: 10m}\n"
    async with (
        open_keyed_server(workspace, make_kernel, waits) as server,
        server.client(None) as anonymous,
    ):
        assert (await anonymous.get("/ready")).status_code == 200
        with write_locked_store(workspace):
            with trio.fail_after(PATIENCE):  # answered while the lock is still held
                ready = await _until(anonymous, "/ready", 503)
                assert (await anonymous.get("/health")).status_code == 200
            assert ready.json()["store"]["failed"] == "time"
            assert "did not answer within" in ready.json()["error"]
        await _until(anonymous, "/ready", 200)  # the waiting check went through


async def test_ready_needs_no_key_and_tells_every_caller_the_same(
    server: Server, workspace: Workspace
) -> None:
    async with (
        server.client("alice") as alice,
        server.client("bob") as bob,
        server.client(None) as anonymous,
    ):
        await _chat(alice, "alice-run", "alice-session")
        answers = [await c.get("/ready") for c in (alice, bob, anonymous)]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert {a.text for a in answers} == {answers[0].text}
        assert answers[0].json() == {
            "status": "ready",
            "store": {"name": "sqlite_store", "available": True},
        }
        with unreadable_store(workspace):
            await _until(anonymous, "/ready", 503)
            answers = [await c.get("/ready") for c in (alice, bob, anonymous)]
            assert [a.status_code for a in answers] == [503, 503, 503]
            assert {a.text for a in answers} == {answers[0].text}
        await _until(anonymous, "/ready", 200)
    for answer in answers:
        for private in ("alice-run", "alice-session", "alice", "bob", str(workspace.path)):
            assert private not in answer.text


async def test_ready_checks_the_store_at_most_once_a_second_however_many_ask(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = server.kernel.store()
    reads = 0
    real = store.load_state

    async def counted(key: str) -> Any:
        nonlocal reads
        if key == "http.ready":
            reads += 1
        return await real(key)

    monkeypatch.setattr(store, "load_state", counted)
    async with server.client(None) as anonymous, trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(anonymous.get, "/ready")
    assert 1 <= reads <= 3  # 20 probes at once: one check (a slow machine may need a second)


# -- PostgreSQL ------------------------------------------------------------------------------


def _pg_support() -> Any:
    """tests/contrib/postgres/pg_support.py (its own folder is on sys.path only when the
    PostgreSQL tests are collected)."""
    if "pg_support" in sys.modules:
        return sys.modules["pg_support"]
    path = Path(__file__).parents[2] / "contrib" / "postgres" / "pg_support.py"
    spec = importlib.util.spec_from_file_location("pg_support", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pg_support"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL server (marks the tests that use it ``postgres``, as tests/conftest.py
    does for this fixture's name)."""
    server = _pg_support().start_server()
    try:
        yield server
    finally:
        server.stop()


def _connections(admin_dsn: str, dsn: str, allowed: bool) -> None:
    import psycopg  # the PostgreSQL extra: only this test needs it
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
                sql.Identifier(name), sql.SQL("true" if allowed else "false")
            )
        )
        if not allowed:  # and the pooled connections of the server under test are cut
            conn.execute(
                sql.SQL(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = {} AND pid <> pg_backend_pid()"
                ).format(sql.Literal(name))
            )


async def test_a_postgresql_database_that_refuses_connections_is_a_503_not_a_500(
    postgres_server: Any,
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    dsn = postgres_server.new_database()
    workspace.write_config(
        keyed_config()
        + "plugins:\n  enable: [soulacy.contrib.postgres]\n"
        + f"postgres: {{dsn: '{dsn}', connect_timeout: 2s}}\n"
    )
    workspace.scripted_agent("echo", [{"text": "hello there"}], repeat=True)
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        name = (await alice.get("/ready")).json()["store"]["name"]
        assert name in ("postgres", "soulacy.contrib.postgres")
        await _chat(alice, "alice-run", "alice-session")
        _connections(postgres_server.admin_dsn, dsn, allowed=False)
        try:
            assert (await alice.get("/health")).status_code == 200
            ready = await _until(alice, "/ready", 503)
            assert ready.json()["store"]["available"] is False
            _assert_store_unavailable(await alice.get("/runs/alice-run"), name)
            chat = await alice.post("/chat", json={"agent_id": "echo", "text": "hi"})
            _assert_store_unavailable(chat, name)
            assert "postgresql://" not in chat.text + ready.text  # where it is: in the log only
        finally:
            _connections(postgres_server.admin_dsn, dsn, allowed=True)
        await _until(alice, "/ready", 200)
        assert (await alice.get("/runs/alice-run")).status_code == 200
    noisy, _ = _outage_logs(caplog)
    assert noisy == []
