"""The store kits' run-id reservation checks are proven by planted bugs: a store whose
``start_run`` does not refuse another request's run id (the SQLite and PostgreSQL stores did
not: another principal's start became the stored run's next attempt) fails ``run_ids_reserved``
in one process and ``run_id_race`` across two real ones.

Each planted store is the memory store with that one thing wrong; the multi-process one is
shared by the processes through a pickle file, each call under a lock of the file (as
``test_kit_planted_bugs.PickledStore``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from soulacy.kernel.store import Lease, RunRecord
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import (
    PROCESS_CHECK_NAMES,
    STORE_CHECK_NAMES,
    check_store,
    check_store_processes,
)

MESSAGE = re.compile(r"^[\w ]+ check \w+: .*\S.*: expected \S.*, got \S.*", re.DOTALL)


def assert_reported(exc: BaseException, kit: str, check: str) -> None:
    message = str(exc)
    assert message.startswith(f"{kit} check {check}: "), (
        f"expected the failure to name '{kit} check {check}', got {message!r}"
    )
    assert MESSAGE.match(message), (
        f"expected '<what>: expected <E>, got <G>' in the failure, got {message!r}"
    )


class AnotherRequestIsARetry(MemoryStore):
    """The stores' old way: another request's start of a stored id is the stored run's next
    attempt, under the first request's identity (both callers told they started it)."""

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = self._runs.get(run.run_id)
        if stored is not None:  # the bug: the identity is not compared
            run = attrs.evolve(
                run,
                agent_id=stored.agent_id,
                session_id=stored.session_id,
                user_id=stored.user_id,
                principal=stored.principal,
            )
        return await super().start_run(run, fence)


class AnotherRequestRelabels(MemoryStore):
    """The last start of an id wins: the stored run is relabelled as the other request's."""

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = self._runs.get(run.run_id)
        if stored is not None and stored.principal != run.principal:
            del self._runs[run.run_id]  # the bug: the first request's run is replaced
        return await super().start_run(run, fence)


class PrincipalOnly(MemoryStore):
    """Refuses another principal only: the same principal's start with another session (or
    agent, or user) becomes the stored run's next attempt."""

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        stored = self._runs.get(run.run_id)
        if stored is not None and stored.principal == run.principal:
            run = attrs.evolve(
                run,
                agent_id=stored.agent_id,
                session_id=stored.session_id,
                user_id=stored.user_id,
            )
        return await super().start_run(run, fence)


SINGLE_PROCESS_BUGS = {
    "another request's start is a retry": AnotherRequestIsARetry,
    "another principal's start relabels the stored run": AnotherRequestRelabels,
    "only another principal is refused": PrincipalOnly,
}


def test_the_kits_have_the_run_id_checks() -> None:
    assert "run_ids_reserved" in STORE_CHECK_NAMES
    assert "run_id_race" in PROCESS_CHECK_NAMES


async def test_the_memory_store_passes_the_run_id_check() -> None:
    await check_store(MemoryStore, only="run_ids_reserved")


@pytest.mark.parametrize("bug", sorted(SINGLE_PROCESS_BUGS))
async def test_the_store_kit_catches(bug: str) -> None:
    with pytest.raises(AssertionError) as info:
        await check_store(SINGLE_PROCESS_BUGS[bug], only="run_ids_reserved")
    assert_reported(info.value, "store", "run_ids_reserved")


# -- across processes ---------------------------------------------------------------------------


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class PickledStore:
    """A MemoryStore (or a planted subclass, named by ``kind``) pickled in one file, each call
    made under an exclusive lock of the file: a reference store for several processes."""

    multi_process = True

    def __init__(self, path: str, kind: str = "MemoryStore") -> None:
        self.path = Path(path)
        self.kind: type[MemoryStore] = globals()[kind]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.kind, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            with locked(self.path):
                try:
                    state = pickle.loads(self.path.read_bytes())
                except FileNotFoundError:
                    state = self.kind()
                result = await method(state, *args, **kwargs)
                scratch = self.path.with_suffix(f".{os.getpid()}")
                scratch.write_bytes(pickle.dumps(state))
                scratch.replace(self.path)
                return result

        return call

    async def wait_run_events(self, run_id: str, after: int, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            while True:
                found = await self.run_events(run_id, after)
                if found is not None and found.events:
                    return True
                await trio.sleep(0.05)
        return False

    async def wait_cancel_requests(self, after: int, seconds: float) -> None:
        await trio.sleep(min(seconds, 0.05))


@pytest.mark.processes
async def test_the_reference_multi_process_store_passes_the_race(tmp_path: Path) -> None:
    result = await check_store_processes(
        f"{__name__}:PickledStore", str(tmp_path / "store.pickle"), only="run_id_race"
    )
    assert (result.skipped, result.not_run, result.passed) == (None, (), ("run_id_race",))


@pytest.mark.processes
@pytest.mark.parametrize("kind", ["AnotherRequestIsARetry", "AnotherRequestRelabels"])
async def test_the_process_kit_catches_two_processes_both_owning_a_raced_id(
    kind: str, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError) as info:
        await check_store_processes(
            f"{__name__}:PickledStore", str(tmp_path / "store.pickle"), kind, only="run_id_race"
        )
    assert_reported(info.value, "store processes", "run_id_race")
