"""SIGTERM of `soulacy serve` with open streams: each ends with a `result` that says the run
was interrupted for the shutdown, the process exits 0 within its grace, and a second
`soulacy serve` on the same workspace resumes each run by its id, replaying the tool calls
completed before the shutdown (docs/decisions/0059)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import sse_events

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

RUNS = 5
GRACE = 1.0  # server.shutdown_grace, seconds
MARGIN = 10.0  # what the stop may take past the grace (a loaded machine)
TOOLS = '''
import time
from pathlib import Path

HERE = Path(__file__).parent


def first() -> str:
    """Counts its executions in a file beside it."""
    with (HERE / "marks").open("a") as out:
        out.write("first\\n")
    return "first done"


def hold() -> str:
    """Says it started, then waits until the workspace's file `release` exists."""
    with (HERE / "marks").open("a") as out:
        out.write("hold\\n")
    while not (HERE.parents[1] / "release").exists():
        time.sleep(0.02)
    return "released"
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(workspace: Workspace, log: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    env["SOULACY_SERVER__PORT"] = str(port)
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path)]
    with log.open("w") as err:
        process = subprocess.Popen(
            [*command, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=err, text=True
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited: {log.read_text()}")
        try:
            if httpx.get(url + "/api/v1/health", timeout=2).status_code == 200:
                return process, url + "/api/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"serve did not start: {log.read_text()}")


def marks(workspace: Workspace, agent: str) -> list[str]:
    path = workspace.path / "agents" / agent / "marks"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def blocking(workspace: Workspace) -> Workspace:
    workspace.write_config({"server": {"shutdown_grace": f"{GRACE:g}s"}})
    for n in range(RUNS):
        agent = f"worker{n}"  # one script each: a scripted model counts its calls per script
        workspace.scripted_agent(
            agent,
            [{"tool": "first", "id": "c0"}, {"tool": "hold", "id": "c1"}, {"text": "done"}],
            tools=["tools.py:first", "tools.py:hold"],
        )
        (workspace.path / "agents" / agent / "tools.py").write_text(TOOLS)
    return workspace


def request(n: int) -> dict[str, str]:
    return {"agent_id": f"worker{n}", "text": "go", "run_id": f"R{n}", "session_id": f"S{n}"}


def all_in_their_tool(workspace: Workspace) -> bool:
    return all(marks(workspace, f"worker{n}") == ["first", "hold"] for n in range(RUNS))


async def read_stream(url: str, n: int, out: dict[int, list[dict[str, Any]]]) -> None:
    body = request(n)
    async with (
        httpx.AsyncClient(base_url=url, timeout=120) as client,
        client.stream("POST", "/chat/stream", json=body) as answer,
    ):
        assert answer.status_code == 200
        out[n] = sse_events((await answer.aread()).decode())


def test_sigterm_interrupts_open_streams_resumably_and_another_serve_resumes_them(
    blocking: Workspace, tmp_path: Path
) -> None:
    process, url = serve(blocking, tmp_path / "first.log")
    streams: dict[int, list[dict[str, Any]]] = {}
    try:

        async def main() -> float:
            async with trio.open_nursery() as nursery:
                for n in range(RUNS):
                    nursery.start_soon(read_stream, url, n, streams)
                with trio.fail_after(60):  # every run is in its blocking tool (a file says)
                    while not all_in_their_tool(blocking):  # noqa: ASYNC110
                        await trio.sleep(0.02)
                process.send_signal(signal.SIGTERM)
                return time.monotonic()

        signalled = trio.run(main)
        process.wait(timeout=GRACE + MARGIN + 30)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    said = (tmp_path / "first.log").read_text()
    assert process.returncode == 0, said
    assert GRACE <= took < GRACE + MARGIN, said  # it let the runs try to finish first
    for n in range(RUNS):
        last = streams[n][-1]
        assert last["event"] == "result", streams[n]
        assert last["data"]["run_id"] == f"R{n}"
        assert last["data"]["status"] == "interrupted"
        assert last["data"]["metadata"]["incomplete_reason"] == "shutdown"

    (blocking.path / "release").touch()
    process, url = serve(blocking, tmp_path / "second.log")
    try:
        for n in range(RUNS):
            runs = httpx.get(f"{url}/runs/R{n}", timeout=30).json()
            assert runs["status"] == "interrupted"
            body = {
                "agent_id": f"worker{n}",
                "text": "go",
                "run_id": f"R{n}",
                "session_id": f"S{n}",
            }
            answer = httpx.post(f"{url}/chat", json=body, timeout=120)
            assert answer.status_code == 200, answer.text
            data = answer.json()
            assert (data["status"], data["reply"]) == ("completed", "done"), data
            assert data["metadata"]["attempt"] == 2
            assert data["metadata"]["tool_calls"] == 1  # hold again; first replayed
            # first ran once, before the shutdown; hold was cut, and ran again
            assert marks(blocking, f"worker{n}") == ["first", "hold", "hold"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
