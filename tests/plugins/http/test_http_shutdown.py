"""A stopping server drains its runs (``server.shutdown_grace``): new runs get 503, a run that
ends within the grace ends normally, and one still running at its end is interrupted for the
shutdown — its stream's last event says so, with the run id — and is resumed by a same-id
retry, its completed tool calls replayed (docs/decisions/0059)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio
from _support.http_server import sse_events

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace

TOOLS = '''
from pathlib import Path

import trio

HERE = Path(__file__).parent


def first() -> str:
    """Counts its executions in a file beside it."""
    with (HERE / "marks").open("a") as out:
        out.write("first\\n")
    return "first done"


async def hold(name: str) -> str:
    """Says it started, then waits until the file `name` exists."""
    (HERE / f"started-{name}").touch()
    while not (HERE / name).exists():
        await trio.sleep(0.02)
    return f"{name} released"
'''


def blocking_agent(workspace: Workspace, agent_id: str, release: str) -> Path:
    workspace.scripted_agent(
        agent_id,
        [
            {"tool": "first", "id": "c0"},
            {"tool": "hold", "arguments": {"name": release}, "id": "c1"},
            {"text": f"{agent_id} finished"},
        ],
        tools=["tools.py:first", "tools.py:hold"],
    )
    folder = workspace.path / "agents" / agent_id
    (folder / "tools.py").write_text(TOOLS)
    return folder


async def until_exists(path: Path) -> None:
    with trio.fail_after(30):  # a tool writes it: there is no event to wait on
        while not await trio.Path(path).exists():  # noqa: ASYNC110
            await trio.sleep(0.02)


async def stream(client: httpx.AsyncClient, body: dict[str, Any], out: list[Any]) -> None:
    async with client.stream("POST", "/chat/stream", json=body) as answer:
        assert answer.status_code == 200
        out.extend(sse_events((await answer.aread()).decode()))


async def test_a_stopping_server_drains_then_interrupts_what_still_runs_resumably(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config({"server": {"port": 0, "shutdown_grace": "1s"}})
    blocked = blocking_agent(workspace, "blocked", "never")
    quick = blocking_agent(workspace, "quick", "release")
    kernel = make_kernel()
    held: list[Any] = []
    finishing: list[Any] = []
    refused: dict[str, httpx.Response] = {}
    alive: dict[str, httpx.Response] = {}
    url = ""

    async with httpx.AsyncClient(timeout=60) as client:

        async def during_the_drain() -> None:
            await kernel.stopping.wait()
            for path in ("/chat", "/chat/stream"):
                refused[path] = await client.post(
                    url + path, json={"agent_id": "quick", "text": "one more"}
                )
            refused["/ready"] = await client.get(url + "/ready")  # not ready while draining
            alive["/health"] = await client.get(url + "/health")  # but alive
            (quick / "release").touch()  # the quick run ends within the grace

        async with trio.open_nursery() as nursery, open_kernel(kernel=kernel):
            url = kernel.started["http"][0] + "/api/v1"
            client.base_url = httpx.URL(url)
            body = {"agent_id": "blocked", "text": "go", "run_id": "B1", "session_id": "S1"}
            nursery.start_soon(stream, client, body, held)
            body = {"agent_id": "quick", "text": "go", "run_id": "Q1", "session_id": "S2"}
            nursery.start_soon(stream, client, body, finishing)
            await until_exists(blocked / "started-never")
            await until_exists(quick / "started-release")
            nursery.start_soon(during_the_drain)
            # leaving the block stops the kernel: the server drains, then interrupts

    for path, answer in refused.items():
        assert answer.status_code == 503, (path, answer.text)
        assert answer.headers["retry-after"].isdigit()
        assert "shutting down" in answer.json()["error"]
    assert refused["/ready"].json()["draining"] is True
    assert alive["/health"].status_code == 200

    assert finishing[-1]["event"] == "result"
    assert finishing[-1]["data"]["status"] == "completed"
    assert finishing[-1]["data"]["reply"] == "quick finished"

    last = held[-1]
    assert last["event"] == "result"
    assert last["data"]["run_id"] == "B1"
    assert last["data"]["status"] == "interrupted"
    assert last["data"]["metadata"]["incomplete_reason"] == "shutdown"
    assert last["data"]["metadata"]["run_id"] == "B1"

    again = make_kernel()
    try:
        stored = await again.store().get_run("B1")
        assert stored is not None
        assert stored.status == "interrupted"  # never "cancelled": it is resumable
        assert (await again.store().get_run("Q1")).status == "completed"  # type: ignore[union-attr]
        # A same-id retry resumes it as its next attempt: the first call replays.
        (blocked / "never").touch()
        result = await again.run(
            "blocked", "go", run_id="B1", session_id="S1", principal=stored.principal
        )
    finally:
        await again.aclose()
    assert (result.status, result.attempt, result.reply) == ("completed", 2, "blocked finished")
    assert result.tool_calls == 1  # hold ran again (it was cut); first was replayed
    assert (blocked / "marks").read_text().splitlines() == ["first"]


async def test_an_idle_server_with_a_long_grace_stops_at_once(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config({"server": {"port": 0, "shutdown_grace": "1h"}})
    kernel = make_kernel()
    with trio.fail_after(5):
        async with open_kernel(kernel=kernel):
            pass


async def test_a_run_waiting_for_a_person_does_not_hold_the_drain(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """It could not end without a decision: the stop suspends it at once (resumable, as a
    stopped server's approval wait always is) instead of waiting out a long grace."""
    workspace.write_config({"server": {"port": 0, "shutdown_grace": "1h"}})
    workspace.scripted_agent(
        "gated",
        [{"tool": "first", "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:first"],
        confirm_tools=["first"],
    )
    (workspace.path / "agents" / "gated" / "tools.py").write_text(TOOLS)
    kernel = make_kernel()
    waiting = trio.Event()
    kernel.events.observe(lambda event: waiting.set(), ("tool.approval",))
    events: list[Any] = []
    with trio.fail_after(30):  # the grace is an hour: only a drain that does not wait ends
        async with (
            httpx.AsyncClient(timeout=30) as client,
            trio.open_nursery() as nursery,  # the stream ends after the kernel stops
            open_kernel(kernel=kernel) as running,
        ):
            url = running.started["http"][0] + "/api/v1/chat/stream"
            body = {"agent_id": "gated", "text": "go", "run_id": "g1", "session_id": "s"}
            nursery.start_soon(stream_to, client, url, body, events)
            await waiting.wait()
    assert events[-1]["event"] == "result"
    assert not (workspace.path / "agents" / "gated" / "marks").exists()  # the tool never ran


async def stream_to(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], out: list[Any]
) -> None:
    async with client.stream("POST", url, json=body) as answer:
        assert answer.status_code == 200
        out.extend(sse_events((await answer.aread()).decode()))
