"""Two `soulacy serve` processes on one PostgreSQL database, their runs' events shared
through it: an owner stopped past its lease (SIGSTOP), whose run another process retried and
finished meanwhile, writes nothing into the shared events once resumed (SIGCONT). A fresh
process streams the run's events with one ``result``: the retry's, ``completed``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from _support.stale_owner import (
    check_a_paused_owner_leaves_the_shared_events_alone,
    write_workspace,
)

from soulacy.plugins.sqlkit import decode_events
from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


async def test_a_paused_owner_leaves_the_shared_events_of_its_successor_alone(
    workspace: Workspace, database: str, tmp_path: Path
) -> None:
    store = f"plugins:\n  enable: [soulacy.contrib.postgres]\npostgres: {{dsn: '{database}'}}\n"
    marks = write_workspace(workspace, store)

    def stored_results(run_id: str) -> list[dict[str, Any]]:
        with psycopg.connect(database) as conn:
            rows = conn.execute(
                "SELECT id, last_id, name, data FROM run_events WHERE run_id = %s"
                " AND name = 'result' ORDER BY id",  # a row's name is its last event's
                (run_id,),
            ).fetchall()
        return [dict(e.data) for row in rows for e in decode_events(row, 0) if e.name == "result"]

    await check_a_paused_owner_leaves_the_shared_events_alone(
        workspace, marks, tmp_path, stored_results
    )
