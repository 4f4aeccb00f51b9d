"""Suspended waits on PostgreSQL (docs/approvals.md#suspended-waits): two `soulacy serve`
processes share one database; a run suspended on one, waiting for approval, holds no lease and
is resumed by a decision sent to the other, which runs the approved call once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support.http_server import sse_events
from _support.serve_nodes import serving, start
from pg_support import Server

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

KEYS = {"alice": "key-alice", "bob": "key-bob"}
TOOLS_PY = '''
from pathlib import Path


def delete(path: str) -> str:
    """Delete a file (counts its executions in a file beside it)."""
    with open(Path(__file__).with_name("ran"), "a") as out:
        out.write(path + "\\n")
    return f"deleted {path}"
'''


async def test_a_run_suspended_on_one_process_is_resumed_by_a_decision_on_another(
    workspace: Workspace, postgres_server: Server, tmp_path: Path
) -> None:
    dsn = postgres_server.new_database()
    workspace.write_config(
        "plugins:\n  enable: [soulacy.contrib.postgres]\n"
        f"postgres: {{dsn: '{dsn}'}}\n"
        "leases: {cancel_poll: 200ms}\n"
        "approvals: {suspend_after: 1ms}\n"
        f"server:\n  api_keys: {json.dumps(KEYS)}\n"
    )
    workspace.scripted_agent(
        "gated",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "deleted"}],
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
    )
    agent = workspace.path / "agents" / "gated"
    (agent / "tools.py").write_text(TOOLS_PY)
    nodes = [start(workspace, name, tmp_path, {}) for name in "ab"]
    with serving(nodes):
        a, b = nodes
        async with a.client(KEYS["alice"]) as alice_a, b.client(KEYS["alice"]) as alice_b:
            body = {"agent_id": "gated", "text": "clean up", "run_id": "PGS", "session_id": "S"}
            streamed = await alice_a.post("/chat/stream", json=body)
            events = sse_events(streamed.text)
            assert [e["event"] for e in events][-2:] == ["tool.approval", "result"]
            assert events[-1]["data"]["metadata"]["incomplete_reason"] == "awaiting_approval"
            waiting = (await alice_b.get("/runs/PGS")).json()
            assert (waiting["status"], waiting["attempt"]) == ("interrupted", 1)
            assert not (agent / "ran").exists()
            confirm = {"run_id": "PGS", "call_id": "c1", "approved": True}
            async with b.client(KEYS["bob"]) as bob:
                assert (await bob.post("/chat/confirm", json=confirm)).status_code == 404
            decided = await alice_b.post("/chat/confirm", json=confirm)
            assert decided.status_code == 200, decided.text
            assert decided.json()["resumed"] is True
            resumed = sse_events((await alice_b.get("/runs/PGS/events")).text)
            assert resumed[-1]["event"] == "result"
            assert resumed[-1]["data"]["status"] == "completed"
            done = (await alice_a.get("/runs/PGS")).json()
            assert (done["status"], done["attempt"]) == ("completed", 2)
    assert (agent / "ran").read_text() == "a.txt\n"  # the approved call ran once
