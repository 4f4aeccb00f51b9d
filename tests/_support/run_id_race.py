"""Two kernels on one store, as two processes are, start the same fresh run id at the same
moment (issue 42, observation 5): a gate holds each run's claim of the id in the store (after
its identity check found the id free), until both are there, so both reach ``start_run``
believing the id is theirs. The store lets exactly one own it; the other is refused before
anything of it is stored, and nothing of either run is lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from soulacy.kernel import Kernel, RunResult, hookimpl
from soulacy.testing import Workspace


class Gate:
    """Holds each run's ``start_run`` (the store's insert-or-fail claim of its id, just after
    its identity check read the id as free) until ``count`` runs are there: both claim an id
    each believes is its own. The store is wrapped, not changed (a ``soulacy_store`` wrapper)."""

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.arrived = 0
        self.open = trio.Event()

    def plugin(self) -> Any:
        gate = self

        class Gated:
            def __init__(self, store: Any) -> None:
                self._store = store

            def __getattr__(self, name: str) -> Any:
                return getattr(self._store, name)

            async def start_run(self, run: Any, fence: Any = None) -> Any:
                gate.arrived += 1
                if gate.arrived >= gate.count:
                    gate.open.set()
                await gate.open.wait()
                return await self._store.start_run(run, fence)

        class RaceGate:
            @hookimpl(wrapper=True)
            def soulacy_store(self, kernel: Kernel) -> Any:
                store = yield
                return None if store is None else Gated(store)

        return RaceGate()


def agent(workspace: Workspace) -> None:
    workspace.scripted_agent("a", [{"text": "done"}], repeat=True)


async def race(
    make_kernel: Callable[..., Kernel],
    starters: list[tuple[str, str]],
    run_id: str = "R",
) -> tuple[list[Kernel], list[RunResult]]:
    """Each (principal, session) of ``starters`` starts ``run_id`` on a kernel of its own, at
    once; the kernels (to close) and the results, in the order of ``starters``."""
    gate = Gate(len(starters))
    kernels = [make_kernel(extra_plugins=[gate.plugin()]) for _ in starters]
    results: list[RunResult | None] = [None] * len(starters)

    async def start(index: int, principal: str, session: str) -> None:
        results[index] = await kernels[index].run(
            "a", f"{principal}'s secret", run_id=run_id, session_id=session, principal=principal
        )

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for index, (principal, session) in enumerate(starters):
                nursery.start_soon(start, index, principal, session)
    done = [r for r in results if r is not None]
    assert len(done) == len(starters)
    return kernels, done


async def check_one_owner(
    make_kernel: Callable[..., Kernel], starters: list[tuple[str, str]], differs: list[str]
) -> None:
    """The race of ``starters`` (two): one run completes and owns the id; the other is refused
    as another request's (``identity_mismatch``, ``differs``) with nothing of it stored; the
    owner's run, history and proof are whole, and its same-request retry is attempt 2."""
    kernels, results = await race(make_kernel, starters)
    try:
        statuses = [(r.status, r.incomplete_reason) for r in results]
        assert sorted(statuses, key=str) == sorted(
            [("completed", None), ("failed", "identity_mismatch")], key=str
        ), f"expected one run to own the raced id and the other refused, got {statuses}"
        won = next(i for i, r in enumerate(results) if r.status == "completed")
        lost = 1 - won
        (owner, owner_session), (loser, loser_session) = starters[won], starters[lost]
        refused = results[lost]
        assert refused.evidence == {"differs": differs}
        assert "belongs to another request" in (refused.error or "")
        store = kernels[0].store()
        stored = await store.get_run("R")
        assert stored is not None
        assert (stored.principal, stored.session_id, stored.status, stored.attempt) == (
            owner,
            owner_session,
            "completed",
            1,
        ), "the owner's run, as stored, after the refused start"
        mine = await store.history(owner_session, "a", owner)
        assert [(e.role, e.content) for e in mine] == [
            ("user", f"{owner}'s secret"),
            ("assistant", "done"),
        ]
        assert {(e.metadata or {}).get("status") for e in mine} == {"completed"}
        assert await store.history(loser_session, "a", loser) == []
        assert "secret" not in str(await store.load_history("a", loser_session, loser))
        proof = await store.get_proof("R")
        assert proof is not None
        assert results[won].proof is not None
        assert proof.sha256 == results[won].proof["sha256"]
        # The owner's same request again is its next attempt (how an interrupted run resumes).
        again = await kernels[won].run(
            "a", f"{owner}'s secret", run_id="R", session_id=owner_session, principal=owner
        )
        assert (again.status, again.attempt) == ("completed", 2)
        # The refused caller's own run, under an id of its own, is served as any.
        own = await kernels[lost].run(
            "a", "mine", run_id="R-own", session_id=loser_session, principal=loser
        )
        assert own.status == "completed"
    finally:
        for kernel in kernels:
            await kernel.aclose()
