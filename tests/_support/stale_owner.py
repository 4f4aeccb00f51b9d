"""An owner paused past its lease, as issue "Step 23" (observation 4) saw it: two `soulacy
serve` processes share one store with their runs' events shared through it; the first runs a
run and is stopped with SIGSTOP mid-tool, past its lease; the second retries the run and
finishes attempt 2; then the first gets SIGCONT. A fresh process reading the run's events
must find the second attempt's alone: one ``result``, ``completed``, attempt 2. The store the
processes share is the caller's (SQLite: the workspace's file; PostgreSQL: a database).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from _support.http_server import sse_events, stream_until
from _support.serve_nodes import Node, serving
from _support.serve_nodes import start as start_node
from soulacy.testing import Workspace

KEYS = {"alice": "key-alice"}
RUN = {"agent_id": "a", "text": "go", "run_id": "R-stale", "session_id": "S-stale"}
TOOLS_PY = '''
import os, time
from pathlib import Path


def slow(name: str) -> str:
    """Marks that it started, then takes SOULACY_TEST_SLOW seconds."""
    marks = Path(os.environ["SOULACY_TEST_MARKS"])
    (marks / f"{name}-{os.getpid()}").write_text("")
    time.sleep(float(os.environ.get("SOULACY_TEST_SLOW", "0")))
    return f"{name} done"
'''


def write_workspace(workspace: Workspace, store: str = "") -> Path:
    """Short leases, one key, and the agent ``a``: a slow tool call, then an answer. ``store``
    is config.yaml's store part (empty: the workspace's SQLite file). Returns the folder of
    the tool's marks."""
    marks = workspace.path / "marks"
    marks.mkdir()
    workspace.write_config(
        store + "leases: {ttl: 1s, heartbeat: 200ms, cancel_poll: 100ms}\n"
        f"server:\n  api_keys: {json.dumps(KEYS)}\n  share_events: true\n"
    )
    workspace.scripted_agent(
        "a",
        [{"tool": "slow", "arguments": {"name": "step"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:slow"],
        tool_effects={"slow": "idempotent"},  # re-run by the successor: ownership, not effects
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(TOOLS_PY)
    return marks


def start(workspace: Workspace, name: str, folder: Path, marks: Path, slow: float) -> Node:
    env = {"SOULACY_TEST_MARKS": str(marks), "SOULACY_TEST_SLOW": str(slow)}
    return start_node(workspace, name, folder, env)


def marked(marks: Path) -> bool:
    return any(marks.iterdir())


async def wait_for_mark(marks: Path, node: Node, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not marked(marks):
        assert node.process.poll() is None, node.log.read_text()
        assert time.monotonic() < deadline, "the run never reached its tool call"
        await trio.sleep(0.02)


async def events_of(node: Node, after: str = "0") -> list[dict[str, Any]]:
    """The run's events as ``node`` serves them after ``after`` (``Last-Event-ID``; "0": all)."""
    async with node.client(KEYS["alice"]) as client:
        answer = await client.get(f"/runs/{RUN['run_id']}/events", headers={"Last-Event-ID": after})
    assert answer.status_code == 200, answer.text
    return sse_events(answer.text)


async def check_a_paused_owner_leaves_the_shared_events_alone(
    workspace: Workspace,
    marks: Path,
    folder: Path,
    stored_results: Callable[[str], list[dict[str, Any]]],
) -> None:
    """The scenario; ``stored_results(run_id)`` reads the data of the run's stored ``result``
    events straight from the shared store."""
    first = start(workspace, "first", folder, marks, slow=60)  # its tool call outlasts the test
    second = start(workspace, "second", folder, marks, slow=0)
    with serving([first, second]):
        seen = await stream_until(first.url, RUN, "tool.call")
        assert [name for _, name in seen] == ["run", "run.limits", "tool.call"]
        await wait_for_mark(marks, first)
        await trio.sleep(0.3)  # its events so far are shared (every 20 ms)
        first.process.send_signal(signal.SIGSTOP)
        await trio.sleep(1.6)  # past its 1 s lease
        async with second.client(KEYS["alice"]) as client:
            retried = await client.post("/chat", json=RUN)
        assert retried.status_code == 200, retried.text
        done = retried.json()
        assert (done["status"], done["metadata"].get("attempt")) == ("completed", 2), done
        await trio.sleep(0.3)  # the second's events are shared
        first.process.send_signal(signal.SIGCONT)
        # The first learns at its next renewal that it lost the lease: its run ends, and its
        # own streams get its own ending.
        with trio.fail_after(30):
            own = await events_of(first)
        assert own[-1]["event"] == "result"
        assert (own[-1]["data"]["status"], own[-1]["data"]["metadata"]["incomplete_reason"]) == (
            "failed",
            "lease_lost",
        ), own[-1]
        await trio.sleep(1.0)  # what the first would share, it has shared by now
        assert first.process.poll() is None, first.log.read_text()

        fresh = start(workspace, "fresh", folder, marks, slow=0)
        with serving([fresh]):
            read = await events_of(fresh)
            # A client that saw attempt 1 up to its end (its own stream's ids) is sent all of
            # attempt 2, from the store, never told it missed any.
            assert await events_of(fresh, str(own[-1]["id"])) == read
    results = [e for e in read if e["event"] == "result"]
    assert [(r["data"]["status"], r["data"]["metadata"].get("attempt")) for r in results] == [
        ("completed", 2)
    ], read
    assert read[-1]["event"] == "result"
    ids = [e["id"] for e in read]
    second = 10**9  # attempt 2's ids follow attempt 1's (docs/http.md, ids across attempts)
    assert ids == list(range(second + 1, second + len(ids) + 1)), ids  # one log, attempt 2's
    assert "".join(e["data"].get("text", "") for e in read if e["event"] == "delta") == "finished"
    stored = stored_results(str(RUN["run_id"]))
    assert [(r["status"], r["metadata"].get("attempt")) for r in stored] == [("completed", 2)]
