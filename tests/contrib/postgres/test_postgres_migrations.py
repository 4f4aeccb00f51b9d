"""Schema migrations: versioned in soulacy_schema, run once however many processes start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from soulacy.contrib.postgres import SCHEMA_VERSION, PostgresStore
from soulacy.kernel.store import RunRecord, StorageError

# A child: connects, waits for the go file, then migrates; prints the version it found.
CHILD = """
import json, os, sys, time
import psycopg
from soulacy.contrib.postgres._schema import migrate
dsn, go = sys.argv[1], sys.argv[2]
with psycopg.connect(dsn, autocommit=True) as conn:
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    found = migrate(conn)
print(json.dumps({"found": found}), flush=True)
"""


def applied(dsn: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version, description FROM soulacy_schema ORDER BY version")
        return [(int(r[0]), str(r[1])) for r in rows.fetchall()]


async def test_a_new_database_is_migrated_once_and_a_second_open_finds_nothing_to_do(
    database: str,
) -> None:
    first = PostgresStore(database)
    assert await first.open() == 0
    second = PostgresStore(database)
    assert await second.open() == SCHEMA_VERSION
    for store in (first, second):
        await store.aclose()
    assert [v for v, _ in applied(database)] == list(range(1, SCHEMA_VERSION + 1))


def test_processes_migrating_at_once_migrate_once(database: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, database, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    try:
        for child in children:  # every child connected before any migrates
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready"
        go.write_text("")
        found = []
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            found.append(json.loads(out)["found"])
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    # One found an empty database; the others waited for its lock and found it migrated.
    assert sorted(found) == [0] + [SCHEMA_VERSION] * 3
    assert [v for v, _ in applied(database)] == list(range(1, SCHEMA_VERSION + 1))


async def test_a_read_only_store_creates_nothing_and_writes_nothing(database: str) -> None:
    reader = PostgresStore(database, read_only=True)
    with pytest.raises(StorageError, match="soulacy store migrate"):
        await reader.get_run("r")
    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT to_regclass('soulacy_schema')").fetchone()
        assert row == (None,)  # nothing was created
    writer = PostgresStore(database)
    await writer.start_run(RunRecord("r", "a", "s"))
    await writer.aclose()
    started = time.monotonic()
    assert (await reader.get_run("r")) is not None
    with pytest.raises(StorageError, match="start run failed: read-only"):
        await reader.start_run(RunRecord("r2", "a", "s"))
    assert time.monotonic() - started < 5
    await reader.aclose()
