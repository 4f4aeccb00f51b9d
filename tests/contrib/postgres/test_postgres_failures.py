"""Failures of the PostgreSQL store are StorageErrors in plain words, never "no data"."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import psycopg
import pytest
import trio
from pg_support import Server
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel.store import RunRecord, StorageError

SECRET = "s3cr3t-Passw0rd"


def with_password(dsn: str) -> str:
    """The DSN with a password (the embedded server trusts local users: it is not checked)."""
    return make_conninfo(dsn, user="postgres", password=SECRET)


@pytest.fixture
async def store(database: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(with_password(database), pool_size=3, statement_timeout=0.3)
    await opened.open()
    yield opened
    await opened.aclose()


def admin(postgres_server: Server, *statements: sql.Composable | str) -> None:
    with psycopg.connect(postgres_server.admin_dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def terminate(postgres_server: Server, database: str) -> sql.Composable:
    name = conninfo_to_dict(database)["dbname"]
    return sql.SQL(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = {} AND pid <> pg_backend_pid()"
    ).format(sql.Literal(name))


async def test_a_statement_timeout_is_a_storage_error_saying_so(
    store: PostgresStore, database: str
) -> None:
    await store.spend("k", 1)
    with psycopg.connect(database) as blocker:
        blocker.execute("LOCK TABLE counters IN ACCESS EXCLUSIVE MODE")  # held until rollback
        started = time.monotonic()
        with pytest.raises(StorageError) as caught:
            await store.spend("k", 1)
        assert time.monotonic() - started < 5
        with pytest.raises(StorageError, match="read counter failed: statement timeout"):
            await store.counter("k")
        blocker.rollback()
    message = str(caught.value)
    assert "spend failed: statement timeout" in message
    assert "QueryCanceled" in message
    assert SECRET not in message
    assert await store.spend("k", 1) == 2  # the refused spend added nothing


async def test_connections_the_server_dropped_are_replaced_without_an_error(
    store: PostgresStore, postgres_server: Server, database: str
) -> None:
    await store.spend("k", 1)
    for n in (1, 2):  # every pooled connection dies (a server restart, a failover)
        admin(postgres_server, terminate(postgres_server, database))
        assert await store.counter("k") == n  # a read, retried on a fresh connection
        admin(postgres_server, terminate(postgres_server, database))
        assert await store.spend("k", 1) == n + 1  # a write, retried: counted once


async def test_a_database_that_stops_accepting_connections_fails_each_call_quickly_then_recovers(
    store: PostgresStore, postgres_server: Server, database: str
) -> None:
    name = conninfo_to_dict(database)["dbname"]
    await store.spend("k", 1)
    refuse = sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name))
    allow = sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name))
    admin(postgres_server, refuse, terminate(postgres_server, database))
    try:
        for call in (lambda: store.counter("k"), lambda: store.spend("k", 1)):
            started = time.monotonic()
            with pytest.raises(StorageError) as caught:
                await call()
            assert time.monotonic() - started < 5
            message = str(caught.value)
            assert "failed: the database does not accept connections" in message
            assert SECRET not in message
    finally:
        admin(postgres_server, allow)
    assert await store.spend("k", 1) == 2  # at once: the pool is still backing off
    assert await store.counter("k") == 2


async def test_a_server_down_at_start_is_a_storage_error_and_the_store_opens_once_it_is_up(
    postgres_server: Server, database: str
) -> None:
    name = conninfo_to_dict(database)["dbname"]
    admin(
        postgres_server,
        sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name)),
    )
    store = PostgresStore(with_password(database), connect_timeout=1)
    try:
        with pytest.raises(StorageError, match="start run failed: the database does not accept"):
            await store.start_run(RunRecord("r", "a", "s"))
        admin(
            postgres_server,
            sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(name)),
        )
        stored = await store.start_run(RunRecord("r", "a", "s"))
        assert stored.attempt == 1
    finally:
        await store.aclose()


async def test_a_missing_database_and_a_refused_port_say_so(postgres_server: Server) -> None:
    missing = PostgresStore(postgres_server.dsn("soulacy_no_such_database"))
    with pytest.raises(StorageError, match="the database or role does not exist"):
        await missing.get_run("r")
    refused = PostgresStore(f"host=127.0.0.1 port=1 dbname=x password={SECRET}", connect_timeout=1)
    with pytest.raises(StorageError) as caught:
        await refused.get_run("r")
    assert "connection refused" in str(caught.value)
    assert SECRET not in str(caught.value)


async def test_text_with_nul_characters_is_stored(store: PostgresStore) -> None:
    run = RunRecord("r", "a", "s")
    await store.start_run(run)
    from soulacy.kernel.messages import Message

    await store.record_turn(run, [Message("user", "a\x00b")], [])
    (message,) = await store.load_history("a", "s")
    assert message.content == "a\ufffdb"


async def test_many_concurrent_calls_share_a_small_pool(database: str) -> None:
    store = PostgresStore(database, pool_size=2)
    results: list[float | None] = []

    async def spend() -> None:
        results.append(await store.spend("k", 1, limit=30))

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(spend)
        assert sorted(r for r in results if r is not None) == [float(n) for n in range(1, 31)]
        assert results.count(None) == 20
    finally:
        await store.aclose()
