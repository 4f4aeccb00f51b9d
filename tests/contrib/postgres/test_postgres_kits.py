"""The PostgreSQL store passes the store kits: one process, and several real ones, each check
a test of its own."""

from __future__ import annotations

import time

import pytest
import trio
from pg_support import DEAD_PASSWORD, Server, open_dead

from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel.store import StorageError
from soulacy.testing import (
    PROCESS_CHECK_NAMES,
    STORE_CHECK_NAMES,
    check_store,
    check_store_processes,
)


@pytest.mark.parametrize("check", STORE_CHECK_NAMES)
async def test_the_postgres_store_passes_the_store_kit(postgres_server: Server, check: str) -> None:
    async def fresh() -> PostgresStore:
        # Each check on a fresh store: a database of its own.
        dsn = await trio.to_thread.run_sync(postgres_server.new_database, "kit")
        return PostgresStore(dsn, pool_size=4)

    await check_store(fresh, failing=open_dead, only=check)


async def test_every_call_on_a_server_that_is_not_there_fails_quickly_without_the_password() -> (
    None
):
    store = open_dead()
    started = time.monotonic()
    messages = []
    for _ in range(5):
        try:
            await store.get_run("r")
        except StorageError as exc:
            messages.append(str(exc))
    await store.aclose()
    assert len(messages) == 5
    assert time.monotonic() - started < 5
    for message in messages:
        assert "connection refused" in message
        assert DEAD_PASSWORD not in message
        assert "read runs failed" in message
        assert "PostgreSQL store postgresql://soulacy@127.0.0.1:1/soulacy:" in message


@pytest.mark.parametrize("check", PROCESS_CHECK_NAMES)
async def test_the_postgres_store_passes_the_multi_process_kit(database: str, check: str) -> None:
    result = await check_store_processes("pg_support:open_postgres", database, only=check)
    assert result.skipped is None, result.skipped
    assert result.not_run == ()
    assert result.passed == (check,)
