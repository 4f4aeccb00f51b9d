"""The end of a run is one commit: its last turn, how it ended and its proof are written in one
step (``record_turn(..., ending=)``), so that no reader sees a run finished without its proof,
or its answer without its status; a store without that parameter still gets the three writes."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from soulacy.kernel import Kernel, Tool, open_kernel
from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    Ending,
    Lease,
    ProofRecord,
    RunRecord,
    StateRow,
    ToolRecord,
    takes_ending,
)
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import Workspace, throwaway_plugin


async def look(topic: str) -> str:
    """Look something up."""
    return f"found {topic}"


class CountingStore(MemoryStore):
    """The in-memory store, keeping what each write was."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[Any, ...]] = []

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
        ending: Ending | None = None,
    ) -> ProofRecord | None:
        status = None if ending is None else ending.metadata["status"]
        self.writes.append(("turn", [m.role for m in messages], status))
        return await super().record_turn(run, messages, tools, fence, state=state, ending=ending)

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        self.writes.append(("finish_run", metadata["status"]))
        await super().finish_run(run_id, metadata, fence)

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        self.writes.append(("finalize_proof",))
        return await super().finalize_proof(run_id, metadata, assertions, fence)


class OlderStore(CountingStore):
    """A store written before ``record_turn`` took ``ending``: the three writes apart."""

    async def record_turn(  # type: ignore[override]
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
    ) -> None:
        self.writes.append(("turn", [m.role for m in messages], None))
        await MemoryStore.record_turn(self, run, messages, tools, fence, state=state)


def _kernel(workspace: Workspace, make_kernel: Callable[..., Kernel], store: MemoryStore) -> Kernel:
    workspace.scripted_agent(
        "a",
        [{"tool": "look", "arguments": {"topic": "x"}, "id": "c1"}, {"text": "done"}],
        tools=["look"],
    )
    plugins = [
        throwaway_plugin("house", soulacy_store=lambda: store),
        throwaway_plugin("t", soulacy_tools=lambda: [Tool.from_function(look)]),
    ]
    return make_kernel(plugins=["no:sqlite_store", "no:memory_store"], extra_plugins=plugins)


async def test_the_answer_the_ending_and_the_proof_are_one_write(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    store = CountingStore()
    assert takes_ending(store)
    result = await _kernel(workspace, make_kernel, store).run("a", "go")
    assert (result.status, result.reply) == ("completed", "done")
    assert store.writes == [
        ("turn", ["user"], None),
        ("turn", ["assistant"], None),
        ("turn", ["tool"], None),
        ("turn", ["assistant"], "completed"),  # the answer, the run's end and its proof
    ]
    proof = await store.get_proof(result.run_id)
    assert proof is not None
    assert result.proof == {"sha256": proof.sha256, "receipts": 1}
    run = await store.get_run(result.run_id)
    assert run is not None
    assert run.status == "completed"


async def test_a_store_whose_record_turn_takes_no_ending_gets_the_three_writes(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    store = OlderStore()
    assert not takes_ending(store)
    result = await _kernel(workspace, make_kernel, store).run("a", "go")
    assert (result.status, result.reply) == ("completed", "done")
    assert store.writes[-3:] == [
        ("turn", ["assistant"], None),
        ("finish_run", "completed"),
        ("finalize_proof",),
    ]
    proof = await store.get_proof(result.run_id)
    assert proof is not None
    assert result.proof == {"sha256": proof.sha256, "receipts": 1}


@pytest.fixture
def no_proofs(workspace: Workspace) -> Iterator[sqlite3.Connection]:
    """Another connection to the workspace's database, to refuse every proof (a trigger) and
    to read what is stored."""
    conn = sqlite3.connect(workspace.path / "soulacy.db", isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


async def test_a_run_whose_proof_is_refused_stores_neither_its_answer_nor_its_status(
    workspace: Workspace, make_kernel: Callable[..., Kernel], no_proofs: sqlite3.Connection
) -> None:
    # Heartbeats too rare to write the outcome before the close does.
    workspace.write_config("leases: {ttl: 60s, heartbeat: 20s}\n")
    (workspace.path / "agents" / "a").mkdir(parents=True)
    (workspace.path / "agents" / "a" / "t.py").write_text(
        "def look(topic: str) -> str:\n    return 'found ' + topic\n"
    )
    workspace.scripted_agent(
        "a",
        [{"tool": "look", "arguments": {"topic": "x"}, "id": "c1"}, {"text": "done"}],
        tools=["t.py:look"],
    )
    kernel = make_kernel()
    async with open_kernel(kernel=kernel, services="runs"):
        await kernel.store().get_run("opened")  # the schema is made
        no_proofs.execute(
            "CREATE TRIGGER no_proofs BEFORE INSERT ON proofs"
            " BEGIN SELECT RAISE(ABORT, 'no proof today'); END"
        )
        result = await kernel.run("a", "go", session_id="s")
        assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
        assert "no proof today" in (result.error or "")
        # Nothing of the end is stored: the answer is not in the history, the run is running
        # (its lease kept by this process, its outcome pending), with no proof.
        run = await kernel.store().get_run(result.run_id)
        assert run is not None
        assert (run.status, run.finished_at) == ("running", None)
        entries = await kernel.store().history("s")
        assert [(e.role, e.content) for e in entries] == [
            ("user", "go"),
            ("assistant", ""),
            ("tool", "found x"),
        ]
        assert await kernel.store().get_proof(result.run_id) is None
        # The store takes proofs again: the close writes the outcome, everything at once.
        no_proofs.execute("DROP TRIGGER no_proofs")
        await kernel.leases.aclose()
        assert kernel.leases.pending() == 0
        run = await kernel.store().get_run(result.run_id)
        assert run is not None
        assert (run.status, run.incomplete_reason) == ("failed", "storage_error")
        entries = await kernel.store().history("s")
        assert [(e.role, e.content) for e in entries][-1] == ("assistant", "done")
        assert {(e.metadata or {}).get("status") for e in entries} == {"failed"}
        proof = await kernel.store().get_proof(result.run_id)
        assert proof is not None
        assert proof.data()["status"] == "failed"
