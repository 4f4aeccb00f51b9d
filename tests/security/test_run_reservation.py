"""Run ids are reserved atomically and runs are capped (step 13, observations 2 and 8).

A run id names one live run: a second request with that id — another principal's, or the same
principal's with other input — is refused before anything of it is stored or published, while
a retry of the same request queues behind the first (the seed: "Concurrent retries in the same
process serialize"). Beyond ``runtime.max_concurrent_sessions`` and its per-principal cap a run
is refused with a suggested wait, never queued without bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from soulacy.kernel import CapacityError, Kernel, RunIdInUse, RunRequest, Tool, UsageError
from soulacy.testing import Workspace, throwaway_plugin


class Gate:
    """A tool that blocks until the test opens the gate: runs stay live while we look."""

    def __init__(self) -> None:
        self.open = trio.Event()

    def plugin(self) -> Any:
        async def wait() -> str:
            """Blocks until the test releases it."""
            await self.open.wait()
            return "released"

        tools = [Tool.from_function(wait)]
        return throwaway_plugin("gate", soulacy_tools=lambda kernel, agent_id: tools)


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def load(
    workspace: Workspace, make_kernel: Callable[..., Kernel], gate: Gate
) -> Callable[..., Kernel]:
    workspace.scripted_agent("a", [{"tool": "wait"}, {"text": "done"}], repeat=True, tools=["wait"])

    def load(config: str = "") -> Kernel:
        if config:
            workspace.write_config(config)
        return make_kernel(extra_plugins=[gate.plugin()])

    return load


async def test_fifty_racing_pairs_of_principals_never_share_a_run(
    load: Callable[..., Kernel], gate: Gate
) -> None:
    kernel = load()
    events = kernel.events.subscribe(buffer=float("inf"))
    outcomes: dict[str, list[str]] = {}

    async def start(run_id: str, principal: str) -> None:
        try:
            result = await kernel.run(
                "a", f"{principal}'s secret", run_id=run_id, principal=principal
            )
            outcomes.setdefault(run_id, []).append(f"{principal}:{result.status}")
        except RunIdInUse as exc:
            owner = exc.owner  # the loser is told the id belongs to the other principal
            outcomes.setdefault(run_id, []).append(f"{principal}:refused-by-{owner}")

    async with trio.open_nursery() as nursery:
        for n in range(50):
            nursery.start_soon(start, f"race-{n}", "alice")
            nursery.start_soon(start, f"race-{n}", "bob")
        await trio.testing.wait_all_tasks_blocked()
        gate.open.set()
    for run_id, seen in outcomes.items():
        winner, loser = sorted(seen, key=lambda s: "refused" in s)
        assert winner.endswith(":completed"), (run_id, seen)
        assert loser.endswith(f":refused-by-{winner.split(':')[0]}"), (run_id, seen)
    started: dict[str, list[Any]] = {}
    completed: dict[str, int] = {}
    while True:
        try:
            event = events.receive_nowait()
        except trio.WouldBlock:
            break
        if event.type == "run.started":
            started.setdefault(event.run_id, []).append(event.data["principal"])
        if event.type == "run.completed":
            completed[event.run_id] = completed.get(event.run_id, 0) + 1
    assert all(len(p) == 1 for p in started.values()), "one run's events per run id"
    assert set(completed.values()) == {1}, "exactly one terminal event per run id"
    store = kernel.store()
    for n in range(50):
        record = await store.get_run(f"race-{n}")
        assert record is not None
        winner = next(s for s in outcomes[f"race-{n}"] if s.endswith("completed"))
        assert record.principal == winner.split(":")[0]


async def test_the_same_principal_with_other_input_is_refused_but_a_retry_queues(
    load: Callable[..., Kernel], gate: Gate
) -> None:
    kernel = load()
    results: list[str] = []

    async def ask(text: str) -> None:
        try:
            results.append((await kernel.run("a", text, run_id="r", session_id="s")).status)
        except RunIdInUse as exc:
            results.append("refused" if exc.owner is None else f"refused by {exc.owner}")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "first")  # the same request: queues behind
        nursery.start_soon(ask, "something else")  # another request with the id: refused
        await trio.testing.wait_all_tasks_blocked()
        assert results == ["refused"]
        gate.open.set()
    assert sorted(results) == ["completed", "completed", "refused"]


async def test_beyond_max_concurrent_sessions_a_run_is_refused_with_a_wait(
    load: Callable[..., Kernel], gate: Gate
) -> None:
    kernel = load("runtime:\n  max_concurrent_sessions: 2\n")
    refused: list[CapacityError] = []
    refused_ids: list[str] = []

    async def ask(n: int) -> None:
        try:
            await kernel.run("a", "x", run_id=f"c{n}", session_id="same", principal=f"p{n}")
        except CapacityError as exc:
            refused.append(exc)
            refused_ids.append(f"c{n}")

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(ask, n)
        await trio.testing.wait_all_tasks_blocked()
        assert len(refused) == 1
        assert (refused[0].scope, refused[0].limit) == ("overall", 2)
        assert refused[0].retry_after >= 1
        assert "at most 2" in str(refused[0])
        gate.open.set()
    stored = await kernel.store().get_run(refused_ids[0])
    assert stored is None, "nothing of a refused run is stored"
    # Once the runs ended, there is room again.
    assert (await kernel.run("a", "x", run_id="after")).status == "completed"


async def test_a_queued_run_counts_and_the_per_principal_cap_leaves_others_room(
    load: Callable[..., Kernel], gate: Gate
) -> None:
    kernel = load("runtime:\n  max_concurrent_sessions_per_principal: 2\n")
    outcome: dict[str, str] = {}

    async def ask(name: str, principal: str) -> None:
        try:
            result = await kernel.run("a", name, session_id="s", principal=principal)
            outcome[name] = result.status
        except CapacityError as exc:
            outcome[name] = exc.scope

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "active", "alice")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "queued", "alice")  # waits for the conversation's turn
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "third", "alice")
        nursery.start_soon(ask, "bob's", "bob")
        await trio.testing.wait_all_tasks_blocked()
        assert outcome == {"third": "principal"}
        gate.open.set()
    assert outcome == {
        "third": "principal",
        "active": "completed",
        "queued": "completed",
        "bob's": "completed",
    }
    assert kernel.runner().statistics() == {"conversations": 0, "runs": 0}


async def test_zero_removes_the_caps(load: Callable[..., Kernel], gate: Gate) -> None:
    kernel = load(
        "runtime:\n  max_concurrent_sessions: 0\n  max_concurrent_sessions_per_principal: 0\n"
    )
    async with trio.open_nursery() as nursery:
        for _n in range(120):  # beyond both defaults (100 and 50)
            nursery.start_soon(kernel.run, "a", "x")
        await trio.testing.wait_all_tasks_blocked()
        assert kernel.runner().statistics()["runs"] == 120
        gate.open.set()


async def test_a_refused_run_gives_its_reservation_back(
    load: Callable[..., Kernel], workspace: Workspace
) -> None:
    kernel = load()
    workspace.write_agent("off", {"llm": {"provider": "scripted"}, "enabled": False})
    kernel = load()
    with pytest.raises(UsageError, match="disabled"):
        await kernel.run("off", "x", run_id="r-off")
    with pytest.raises(UsageError):
        await kernel.run("nosuch", "x", run_id="r-none")
    runner = kernel.runner()
    assert runner.statistics() == {"conversations": 0, "runs": 0}
    handle = runner.reserve(RunRequest("a", "", session_id="s", run_id="r-kept", principal="alice"))
    with pytest.raises(RunIdInUse):
        runner.reserve(RunRequest("a", "", session_id="s", run_id="r-kept", principal="bob"))
    runner.release(handle)
    runner.release(handle)  # twice is harmless
    assert runner.statistics() == {"conversations": 0, "runs": 0}


async def test_an_exclusive_reservation_refuses_even_the_same_request(
    load: Callable[..., Kernel],
) -> None:
    """A transport that must answer at once (HTTP's 409) asks for an exclusive reservation."""
    runner = load().runner()
    request = RunRequest("a", "x", session_id="s", run_id="r", principal="p")
    first = runner.reserve(request)
    with pytest.raises(RunIdInUse) as caught:
        runner.reserve(request, exclusive=True)
    assert caught.value.owner == "p"
    queued = runner.reserve(request)
    runner.release(queued)
    runner.release(first)
    assert runner.statistics() == {"conversations": 0, "runs": 0}


@pytest.mark.parametrize("missing", ["run_id", "session_id"])
def test_a_reservation_names_its_run_id_and_its_session(
    load: Callable[..., Kernel], missing: str
) -> None:
    """What a reservation holds is a run id in a conversation: a request without either is
    refused before anything is held (the engine gives its own runs both first)."""
    runner = load().runner()
    ids = {"run_id": "r", "session_id": "s", missing: None}
    with pytest.raises(UsageError, match="names both"):
        runner.reserve(RunRequest("a", "x", **ids))
    assert runner.statistics() == {"conversations": 0, "runs": 0}
