"""Three `soulacy serve` processes, as on three hosts, share one PostgreSQL database: any of
them serves any run, a stream resumes on another process than the one running it, a process
killed with SIGKILL leaves interrupted runs that another retries to completion, and a cron
schedule runs once per tick across the three."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import trio
from _support.http_server import sse_events, stream_until
from _support.serve_nodes import Node, serving, start
from pg_support import Server

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

KEYS = {"alice": "key-alice", "bob": "key-bob"}
COUNT_TOOL = '''
import time
from pathlib import Path


def pause(step: str) -> str:
    """Takes a while."""
    time.sleep(0.4)
    return f"paused at {step}"


def mark() -> str:
    """Counts its executions in a file beside it."""
    with open(Path(__file__).with_name("marks"), "a") as out:
        out.write("x\\n")
    return "marked"
'''


def write_workspace(workspace: Workspace, dsn: str) -> None:
    workspace.write_config(
        "plugins:\n  enable: [soulacy.contrib.postgres]\n"
        f"postgres: {{dsn: '{dsn}'}}\n"
        "leases: {ttl: 2s, heartbeat: 300ms, cancel_poll: 200ms}\n"
        f"server:\n  api_keys: {json.dumps(KEYS)}\n"
        "runtime:\n  max_concurrent_sessions: 500\n  max_concurrent_sessions_per_principal: 500\n"
    )
    workspace.scripted_agent("chat", [{"text": "hello there friend"}], repeat=True)
    workspace.scripted_agent(
        "slow",
        [
            {"tool": "pause", "arguments": {"step": "one"}},
            {"tool": "pause", "arguments": {"step": "two"}},
            {"tool": "pause", "arguments": {"step": "three"}},
            {"text": "all three steps are done"},
        ],
        tools=["tools.py:pause"],
    )
    workspace.scripted_agent(
        "crash",
        [{"tool": "mark", "id": "m1"}, {"text": "recovered after the crash", "sleep": 3}],
        tools=["tools.py:mark"],
    )
    workspace.scripted_agent(
        "cron", [{"text": "tick done"}], repeat=True, schedule={"cron": "* * * * *"}
    )
    for agent in ("slow", "crash"):
        (workspace.path / "agents" / agent / "tools.py").write_text(COUNT_TOOL)


@pytest.fixture
def cluster(
    workspace: Workspace, postgres_server: Server, tmp_path: Path
) -> Iterator[tuple[list[Node], str]]:
    dsn = postgres_server.new_database()
    write_workspace(workspace, dsn)
    nodes = [
        start(workspace, name, tmp_path, {"SOULACY_HOST_ID": f"host-{name}"}) for name in "abc"
    ]
    with serving(nodes):
        yield nodes, dsn


def rows(dsn: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(query, args).fetchall())


async def test_three_processes_share_runs_streams_crashes_and_schedules(
    cluster: tuple[list[Node], str], workspace: Workspace
) -> None:
    (a, b, c), dsn = cluster
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            (n.name, who): await stack.enter_async_context(n.client(KEYS[who]))
            for n in (a, b, c)
            for who in KEYS
        }
        await check_the_cluster(a, b, c, dsn, clients, workspace)


async def check_the_cluster(
    a: Node,
    b: Node,
    c: Node,
    dsn: str,
    clients: dict[tuple[str, str], httpx.AsyncClient],
    workspace: Workspace,
) -> None:
    started = time.monotonic()

    # -- 300 chats spread across the three, by two principals -----------------------------
    results: dict[str, dict[str, Any]] = {}
    limiter = trio.CapacityLimiter(24)

    async def chat(index: int) -> None:
        node, who = (a, b, c)[index % 3], ("alice", "bob")[index % 2]
        run_id = f"chat-{index}"
        async with limiter:
            answer = await clients[node.name, who].post(
                "/chat",
                json={"agent_id": "chat", "text": f"hi {index}", "run_id": run_id},
            )
        assert answer.status_code == 200, answer.text
        results[run_id] = answer.json() | {"principal": who}

    with trio.fail_after(240):
        async with trio.open_nursery() as nursery:
            for index in range(300):
                nursery.start_soon(chat, index)
    assert len(results) == 300
    assert {r["status"] for r in results.values()} == {"completed"}
    stored = rows(dsn, "SELECT principal, count(*) FROM runs WHERE agent_id = 'chat' GROUP BY 1")
    assert dict(stored) == {"alice": 150, "bob": 150}
    # Every run is readable from every process by its principal, and by no other.
    for run_id in ("chat-0", "chat-1", "chat-2"):
        owner = results[run_id]["principal"]
        other = "bob" if owner == "alice" else "alice"
        for node in (a, b, c):
            mine = await clients[node.name, owner].get(f"/runs/{run_id}")
            assert (mine.status_code, mine.json()["status"]) == (200, "completed")
            theirs = await clients[node.name, other].get(f"/runs/{run_id}")
            assert theirs.status_code == 404

    # -- a stream started on a, resumed on b ------------------------------------------------
    body = {"agent_id": "slow", "text": "take three steps", "run_id": "resume-1"}
    first = await stream_until(a.url, body, "tool.call")
    assert [name for _, name in first] == ["run", "run.limits", "tool.call"]
    last_id = first[-1][0]
    assert (await clients["c", "bob"].get("/runs/resume-1/events")).status_code == 404
    resumed = await clients["b", "alice"].get(
        "/runs/resume-1/events", headers={"Last-Event-ID": str(last_id)}
    )
    rest = sse_events(resumed.text)
    ids = [i for i, _ in first] + [e["id"] for e in rest]
    assert ids == list(range(1, len(ids) + 1))  # every event once, none missed
    names = [e["event"] for e in rest]
    assert names[-1] == "result"
    assert "result" not in names[:-1]
    assert (names.count("tool.call"), names.count("tool.result")) == (2, 3)
    assert "".join(e["data"]["text"] for e in rest if e["event"] == "delta") == (
        "all three steps are done"
    )
    assert rest[-1]["data"]["status"] == "completed"
    # Once seen, the end is the end, on any process.
    seen = {"Last-Event-ID": str(rest[-1]["id"])}
    done = await clients["c", "alice"].get("/runs/resume-1/events", headers=seen)
    assert done.status_code == 204

    # -- c killed mid-run: interrupted after its lease, retried on b with replay ------------
    marks = workspace.path / "agents" / "crash" / "marks"
    body = {"agent_id": "crash", "text": "mark once", "run_id": "crash-1", "session_id": "S-crash"}
    await stream_until(c.url, body, "tool.result")  # the tool ran; the model takes 3 s to answer
    await trio.sleep(0.3)  # killed while the model thinks (its events shared by then)
    c.process.send_signal(signal.SIGKILL)
    c.process.wait(10)
    killed_at = time.monotonic()
    with trio.fail_after(30):
        ended = sse_events((await clients["a", "alice"].get("/runs/crash-1/events")).text)
    takeover = time.monotonic() - killed_at
    assert [e["event"] for e in ended][:4] == ["run", "run.limits", "tool.call", "tool.result"]
    assert ended[-1]["event"] == "result"
    assert ended[-1]["data"]["status"] == "interrupted"
    assert (await clients["a", "alice"].get("/runs/crash-1")).json()["status"] == "interrupted"
    retried = await clients["b", "alice"].post("/chat", json=body)
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "completed"
    assert retried.json()["reply"] == "recovered after the crash"
    assert marks.read_text() == "x\n"  # the recorded tool call was replayed, not run again
    (attempt,) = rows(dsn, "SELECT attempt FROM runs WHERE run_id = 'crash-1'")[0]
    assert attempt == 2

    # -- the cron schedule: each tick once across the processes -----------------------------
    deadline = started + 150  # a minute boundary has passed by then, with a margin
    ticks: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        ticks = rows(dsn, "SELECT run_id, status FROM runs WHERE run_id LIKE 'schedule:cron:%%'")
        if ticks and all(status != "running" for _, status in ticks):
            break
        await trio.sleep(0.5)
    await trio.sleep(2)  # every chance for another process to run the same tick again
    executions = rows(
        dsn,
        "SELECT run_id, count(*) FROM conversation_history WHERE role = 'user'"
        " AND run_id LIKE 'schedule:cron:%%' GROUP BY run_id",
    )
    assert ticks, "no scheduled run within the time limit"
    assert all(count == 1 for _, count in executions), executions
    assert {
        status
        for _, status in rows(
            dsn, "SELECT run_id, status FROM runs WHERE run_id LIKE 'schedule:cron:%%'"
        )
    } <= {"completed"}
    print(f"takeover after SIGKILL: {takeover:.1f} s")
