"""A run whose outcome PostgreSQL refused (a table locked past the statement timeout) is
recorded ``failed (storage_error)`` once the database answers again, never ``interrupted``
while its process lives (docs/running.md#after-a-crash)."""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable, Iterator

import psycopg
import pytest
import trio

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace

# Lease renewals (another table) keep succeeding: the run stays alive across several ttls.
# Each heartbeat renews, then retries the refused write, which waits out the statement timeout:
# the ttl leaves a loaded machine room for several such rounds.
TTL = 1.5  # seconds
CONFIG = (
    "plugins:\n  enable: [soulacy.contrib.postgres]\n"
    "postgres: {{dsn: '{dsn}', statement_timeout: 300ms}}\n"
    f"leases: {{{{ttl: {TTL}s, heartbeat: 100ms, cancel_poll: 100ms}}}}\n"
)
WAIT = 5.0  # seconds: the bound of the waits below


@pytest.fixture
def blocker(
    workspace: Workspace, database: str
) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another connection: the agent's ``lock`` tool locks the history table on it until the
    test rolls back."""
    conn = psycopg.connect(database)
    name = f"_soulacy_pg_lock_{id(conn)}"
    module = types.ModuleType(name)
    module.conn = conn  # type: ignore[attr-defined]
    sys.modules[name] = module
    (workspace.path / "agents" / "a").mkdir(parents=True)
    (workspace.path / "agents" / "a" / "t.py").write_text(
        f"import {name}\n"
        "def lock() -> str:\n"
        f"    {name}.conn.execute('LOCK TABLE conversation_history IN ACCESS EXCLUSIVE MODE')\n"
        "    return 'locked'\n"
    )
    workspace.write_config(CONFIG.format(dsn=database))
    workspace.scripted_agent(
        "a", [{"tool": "lock", "id": "c1"}, {"text": "done"}], tools=["t.py:lock"]
    )
    try:
        yield conn
    finally:
        del sys.modules[name]
        conn.rollback()
        conn.close()


async def test_an_outcome_postgres_refused_is_written_once_it_answers(
    blocker: psycopg.Connection[tuple[object, ...]], make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel()
    async with open_kernel(kernel=kernel, services="runs"):  # its nursery keeps the outcome
        result = await kernel.run("a", "go", session_id="s")
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        assert "statement timeout" in (result.error or "")
        # Locked for two lease lifetimes: the run stays running, its lease renewed.
        until = time.monotonic() + 2 * TTL
        while time.monotonic() < until:
            run = await kernel.store().get_run(result.run_id)
            assert run is not None
            assert run.status == "running"
            await trio.sleep(0.05)
        blocker.rollback()  # the database answers again
        deadline = time.monotonic() + WAIT
        while True:
            run = await kernel.store().get_run(result.run_id)
            assert run is not None
            assert run.status != "interrupted"
            if run.status != "running":
                break
            assert time.monotonic() < deadline, "the outcome was never stored"
            await trio.sleep(0.02)
        assert (run.status, run.incomplete_reason) == ("failed", "storage_error")
        assert run.lease_key is not None
        while await kernel.store().get_lease(run.lease_key) is not None:
            assert time.monotonic() < deadline, "the run's lease was not released"
            await trio.sleep(0.02)
        entries = await kernel.store().history("s")
        assert [e.role for e in entries] == ["user", "assistant", "tool"]
