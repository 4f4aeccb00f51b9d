"""The ``retention:`` section on a real PostgreSQL, applied by ``soulacy serve``'s job: old
finished runs go with everything they left (their portal state included); running runs and
every row of another principal stay; the defaults keep history and proofs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from soulacy.kernel import Kernel, open_kernel
from soulacy.plugins.retention._service import RetentionService
from soulacy.testing import Workspace

sys.path.insert(0, str(Path(__file__).parents[2] / "plugins" / "retention"))
from retention_support import (  # type: ignore[import-not-found, unused-ignore]
    DAY,
    SERVED,
    age_statements,
    kept,
    two_principals,
)

ENABLE = "plugins:\n  enable: [soulacy.contrib.postgres]\n"
BEFORE = {
    "a-old": {"run": True, "proof": True, "state": True, "records": ["c1"]},
    "b-new": {"run": True, "proof": True, "state": True, "records": ["c1"]},
    "a-going": {"run": True, "proof": False, "state": True, "records": ["c1"]},
    "b-going": {"run": True, "proof": False, "state": True, "records": ["c1"]},
    "alice": ["alice: a-old", "alice: a-going"],
    "bob": ["bob: b-new", "bob: b-going"],
}


def age(dsn: str, run_id: str, seconds: float) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for statement in age_statements("%s"):
            conn.execute(statement, (seconds, run_id))


async def swept(
    workspace: Workspace, make_kernel: Callable[..., Kernel], dsn: str, retention: str
) -> dict[str, Any]:
    workspace.write_config(ENABLE + SERVED + f"postgres:\n  dsn: '{dsn}'\n" + retention)
    seeding = make_kernel()
    await two_principals(seeding.store())
    await seeding.aclose()
    age(dsn, "a-old", 100 * DAY)
    kernel = make_kernel()
    async with open_kernel(kernel=kernel):
        service = kernel.started["retention"]
        assert isinstance(service, RetentionService)
        await service.wait_sweeps(1)
        after: dict[str, Any] = await kept(kernel.store())
        return after


async def test_old_finished_runs_go_with_their_rows_and_nobody_elses_on_postgres(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    after = await swept(workspace, make_kernel, database, "retention:\n  runs: 720h\n")
    gone = {"run": False, "proof": False, "state": False, "records": []}
    assert after == {**BEFORE, "a-old": gone, "alice": ["alice: a-going"]}


async def test_the_defaults_keep_everything_runs_left_on_postgres(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    assert await swept(workspace, make_kernel, database, "") == BEFORE


async def test_history_and_proof_limits_keep_the_runs_on_postgres(
    workspace: Workspace, make_kernel: Callable[..., Kernel], database: str
) -> None:
    limits = "retention:\n  history: 720h\n  proofs: 720h\n"
    after = await swept(workspace, make_kernel, database, limits)
    old = {"run": True, "proof": False, "state": True, "records": []}
    assert after == {**BEFORE, "a-old": old, "alice": ["alice: a-going"]}


async def test_a_copied_file_keeps_the_tokens_of_its_pruned_leases_above(
    tmp_path: Path, database: str
) -> None:
    from soulacy.contrib.postgres._copy import copy_sqlite
    from soulacy.contrib.postgres._store import PostgresStore
    from soulacy.kernel.store import LeaseOwner, RetentionLimits
    from soulacy.plugins.sqlite_store import SQLiteStore

    owner = LeaseOwner.current("copy-test")
    source = SQLiteStore(tmp_path / "soulacy.db")
    for _ in range(3):
        grant = await source.acquire_lease("run:once", owner, 60.0, holder="once")
        assert grant.lease is not None
        await source.release_lease(grant.lease)
    assert (await source.prune(RetentionLimits(leases=0.0))).leases == 1
    await source.aclose()
    target = PostgresStore(database, pool_size=2)
    try:
        report = await copy_sqlite(target, tmp_path / "soulacy.db")
        assert (report.copied["leases"], report.copied["lease_high_water"]) == (0, 1)
        again = await target.acquire_lease("run:once", owner, 60.0, holder="once")
        assert again.acquired
        assert again.lease is not None
        assert again.lease.token == 4  # above the three the file granted, though pruned
    finally:
        await target.aclose()
