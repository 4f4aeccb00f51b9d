"""Run ids are reserved in the PostgreSQL store (issue 42, observation 5): alice on one process
and bob on another start the same fresh run id at the same moment; exactly one owns it, the
other is refused before anything of it is stored (over HTTP: ``404`` to another principal,
``409`` to the same one), and nothing of either run is lost.

First two kernels on one database (two processes, as the store sees them, with a gate that
holds both runs past their identity check), then two real ``soulacy serve`` processes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import trio
from _support.http_server import sse_events
from _support.run_id_race import agent, check_one_owner
from _support.serve_nodes import Node, serving, start
from pg_support import Server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

ENABLE = "plugins:\n  enable: [soulacy.contrib.postgres]\n"
KEYS = {"alice": "key-alice", "bob": "key-bob"}


@pytest.mark.parametrize(
    ("starters", "differs"),
    [
        ([("alice", "s-alice"), ("bob", "s-bob")], ["session_id", "principal"]),
        ([("alice", "s-1"), ("alice", "s-2")], ["session_id"]),
    ],
    ids=["alice-and-bob", "alice-from-two-sessions"],
)
async def test_two_kernels_racing_one_fresh_run_id_on_one_database_make_one_run(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    database: str,
    starters: list[tuple[str, str]],
    differs: list[str],
) -> None:
    workspace.write_config(ENABLE + f"postgres: {{dsn: '{database}'}}\n")
    agent(workspace)
    await check_one_owner(make_kernel, starters, differs)


# -- two `soulacy serve` processes --------------------------------------------------------------


@pytest.fixture
def nodes(
    workspace: Workspace, postgres_server: Server, tmp_path: Path
) -> Iterator[tuple[list[Node], str]]:
    dsn = postgres_server.new_database()
    workspace.write_config(
        ENABLE
        + f"postgres: {{dsn: '{dsn}'}}\n"
        + "leases: {ttl: 2s, heartbeat: 300ms, cancel_poll: 200ms}\n"
        + f"server:\n  api_keys: {json.dumps(KEYS)}\n"
    )
    workspace.scripted_agent("chat", [{"text": "hello there friend"}], repeat=True)
    started = [
        start(workspace, name, tmp_path, {"SOULACY_HOST_ID": f"host-{name}"}) for name in "ab"
    ]
    with serving(started):
        yield started, dsn


def rows(dsn: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return list(conn.execute(query, args).fetchall())


ROUNDS = 10
SHARED_RESULT = (  # the owner's result, shared through the store
    "SELECT 1 FROM run_events WHERE run_id = %s AND name = 'result'"
    " AND data LIKE '%%\"completed\"%%' AND data LIKE %s"
)


@pytest.mark.processes
async def test_alice_and_bob_on_two_processes_racing_fresh_run_ids_make_one_run_each(
    nodes: tuple[list[Node], str],
) -> None:
    (a, b), dsn = nodes
    async with contextlib.AsyncExitStack() as stack:
        client = {
            (node.name, who): await stack.enter_async_context(node.client(KEYS[who]))
            for node in (a, b)
            for who in KEYS
        }
        # alice on a, bob on b; then alice on both, from two sessions
        races = [("alice", "a", "bob", "b", 404), ("alice", "a", "alice", "b", 409)]
        # /chat, then /chat/stream: a stream that lost the id is refused before its headers
        for route in ("/chat", "/chat/stream"):
            for first, on_first, second, on_second, refused in races:
                for n in range(ROUNDS):
                    run_id = f"race{route.replace('/', '-')}-{second}-{n}"
                    starters = [
                        (first, on_first, f"S-{run_id}-{first}-{on_first}"),
                        (second, on_second, f"S-{run_id}-{second}-{on_second}"),
                    ]
                    await check_round(client, dsn, run_id, starters, refused, route)


async def check_round(
    client: dict[tuple[str, str], httpx.AsyncClient],
    dsn: str,
    run_id: str,
    starters: list[tuple[str, str, str]],
    refused: int,
    route: str = "/chat",
) -> None:
    answers: list[httpx.Response | None] = [None, None]

    async def post(index: int) -> None:
        who, node, session = starters[index]
        body = {"agent_id": "chat", "text": f"{who}'s secret {session}", "run_id": run_id}
        answers[index] = await client[node, who].post(route, json=body | {"session_id": session})

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, 0)
            nursery.start_soon(post, 1)
    codes = [answer.status_code if answer else None for answer in answers]
    assert sorted(codes) == sorted([200, refused]), (
        f"{run_id}: expected one 200 and one {refused} for two requests racing one fresh run id"
        f" on two processes, got {codes}: {[a.text[:300] if a else None for a in answers]}"
    )
    won = codes.index(200)
    owner, _, session = starters[won]
    loser, _, loser_session = starters[1 - won]
    answer = answers[won]
    assert answer is not None
    result = answer.json() if route == "/chat" else sse_events(answer.text)[-1]["data"]
    assert result["status"] == "completed"
    assert "attempt" not in result["metadata"]  # its first attempt, not a second
    refusal = answers[1 - won]
    assert refusal is not None
    assert "error" in refusal.json()  # JSON, not a stream
    stored = rows(dsn, "SELECT principal, session_id, attempt FROM runs WHERE run_id = %s", run_id)
    assert stored == [(owner, session, 1)]
    # The owner sees its run, history and events from both processes (the other process reads
    # the events the store shares, written within a few ms); the other principal gets nothing.
    for _ in range(500):  # 10 s
        if rows(dsn, SHARED_RESULT, run_id, f"%{session}%"):
            break
        await trio.sleep(0.02)
    assert rows(dsn, "SELECT DISTINCT principal FROM run_events WHERE run_id = %s", run_id) == [
        (owner,)
    ]
    for where in ("a", "b"):
        mine = await client[where, owner].get(f"/runs/{run_id}")
        assert (mine.status_code, mine.json()["status"]) == (200, "completed")
        history = await client[where, owner].get(f"/history/{session}")
        assert history.status_code == 200
        entries = [(e["role"], e["content"]) for e in history.json()["entries"]]
        assert entries == [
            ("user", f"{owner}'s secret {session}"),
            ("assistant", "hello there friend"),
        ]
        events = sse_events((await client[where, owner].get(f"/runs/{run_id}/events")).text)
        names = [e["event"] for e in events]
        assert (names[0], names.count("run"), names.count("result")) == ("run", 1, 1), names
        assert events[-1]["data"]["status"] == "completed"
        assert events[-1]["data"]["session_id"] == session
        if loser != owner:
            theirs = await client[where, loser].get(f"/runs/{run_id}")
            assert theirs.status_code == 404
        lost = await client[where, loser].get(f"/history/{loser_session}")
        assert lost.status_code == 404, lost.text
    assert rows(
        dsn, "SELECT count(*) FROM conversation_history WHERE session_id = %s", loser_session
    ) == [(0,)]
