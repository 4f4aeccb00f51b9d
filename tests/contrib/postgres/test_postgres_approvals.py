"""Pending approvals survive ``soulacy store copy`` from SQLite into PostgreSQL: a run that
waited on one host is decided, and resumed, on the shared store."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

import attrs
import trio
from psycopg.conninfo import make_conninfo

from soulacy.contrib.postgres import PostgresStore
from soulacy.kernel import Event, Kernel
from soulacy.kernel.store import ApprovalDecision
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.testing import Workspace

TOOLS_PY = '''
def delete(path: str) -> str:
    """Delete a file (only says so)."""
    return f"deleted {path}"
'''


async def _wait_for(events: trio.MemoryReceiveChannel[Event], type: str) -> None:
    with trio.fail_after(30):
        async for event in events:
            if event.type == type:
                return


async def test_a_pending_approval_is_copied_and_decided_on_postgres(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., subprocess.CompletedProcess[str]],
    database: str,
) -> None:
    workspace.scripted_agent(
        "gated",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
    )
    (workspace.path / "agents" / "gated" / "tools.py").write_text(TOOLS_PY)
    kernel = make_kernel()  # the SQLite store
    events = kernel.events.subscribe(buffer=float("inf"))
    try:
        with trio.CancelScope() as stop:  # the process stops while the run waits

            async def stop_when_asked() -> None:
                await _wait_for(events, "tool.approval")
                stop.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_when_asked)
                await kernel.run("gated", "clean up", run_id="PG1", session_id="s")
    finally:
        await kernel.aclose()
    sqlite_store = SQLiteStore(workspace.path / "soulacy.db", read_only=True)
    try:
        in_sqlite = await sqlite_store.list_approvals()
    finally:
        await sqlite_store.aclose()
    assert [(r.run_id, r.call_id, r.pending) for r in in_sqlite] == [("PG1", "c1", True)]

    copied = soulacy_cli(
        [
            "-p",
            "soulacy.contrib.postgres",
            "store",
            "copy",
            "--to",
            make_conninfo(database, password="x"),
        ],
        cwd=workspace.path,
        env={"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert copied.returncode == 0, copied.stderr
    assert re.search(r"^  tool_approvals +1$", copied.stdout, re.MULTILINE), copied.stdout

    store = PostgresStore(database)
    try:
        assert await store.list_approvals() == in_sqlite  # every field, as it was
        run = await store.get_run("PG1")
        assert run is not None
        assert run.status == "interrupted"
        decided = await store.decide_approval("PG1", "c1", ApprovalDecision(True, "ops"))
        assert decided is not None
        assert decided.decision is not None
        assert (decided.decision.approved, decided.decision.approver) == (True, "ops")
        # The copy set the order of requests past the file's last one.
        await store.request_approval(attrs.evolve(in_sqlite[0], call_id="c2"))
        assert [r.call_id for r in await store.list_approvals("PG1")] == ["c1", "c2"]
    finally:
        await store.aclose()
