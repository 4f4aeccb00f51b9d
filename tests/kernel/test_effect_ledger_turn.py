"""The effect ledger's reservation goes in the commit of the reply that asked for the call
(``record_turn(..., state=)``), and a store without that parameter still gets both writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message
from soulacy.kernel.store import Lease, RunRecord, StateRow, ToolRecord, takes_state
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import Workspace, throwaway_plugin


async def send(to: str) -> str:
    """Send something (a tool that changes something: its calls are reserved)."""
    return f"sent to {to}"


class CountingStore(MemoryStore):
    """The in-memory store, keeping what each write was: turns with or without a state row,
    and state rows saved alone."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, Any]] = []

    async def record_turn(
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
        *,
        state: StateRow | None = None,
    ) -> None:
        self.writes.append(("turn", [m.role for m in messages], state and state.key))
        await super().record_turn(run, messages, tools, fence, state=state)

    async def save_state(self, key: str, value: Any, fence: Any = None, **kw: Any) -> None:
        self.writes.append(("state", key))
        await super().save_state(key, value, fence, **kw)


class OlderStore(MemoryStore):
    """A store written before ``record_turn`` took ``state``: the turn and the row apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[str, Any]] = []

    async def record_turn(  # type: ignore[override]
        self,
        run: RunRecord,
        messages: Sequence[Message],
        tools: Sequence[ToolRecord],
        fence: Lease | None = None,
    ) -> None:
        self.writes.append(("turn", [m.role for m in messages]))
        await super().record_turn(run, messages, tools, fence)

    async def save_state(self, key: str, value: Any, fence: Any = None, **kw: Any) -> None:
        self.writes.append(("state", key))
        await super().save_state(key, value, fence, **kw)


def _kernel(workspace: Workspace, make_kernel: Callable[..., Kernel], store: MemoryStore) -> Kernel:
    workspace.scripted_agent(
        "a",
        [{"tool": "send", "arguments": {"to": "x"}, "id": "c1"}, {"text": "done"}],
        tools=["send"],
    )
    plugins = [
        throwaway_plugin("house", soulacy_store=lambda: store),
        throwaway_plugin("t", soulacy_tools=lambda: [Tool.from_function(send)]),
    ]
    return make_kernel(plugins=["no:sqlite_store", "no:memory_store"], extra_plugins=plugins)


async def test_a_reserved_call_is_stored_with_the_reply_that_asked_for_it_in_one_write(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    store = CountingStore()
    assert takes_state(store)
    result = await _kernel(workspace, make_kernel, store).run("a", "go")
    assert (result.status, result.reply) == ("completed", "done")
    key = f"effects:{result.run_id}"
    assert store.writes == [
        ("turn", ["user"], None),
        ("turn", ["assistant"], key),  # the reply and its call's reservation, one write
        ("turn", ["tool"], None),
        ("turn", ["assistant"], None),
    ]
    reserved = (await store.load_state(key) or {})["calls"]
    assert {c: (r["tool"], r["attempt"]) for c, r in reserved.items()} == {"c1": ("send", 1)}


async def test_a_store_whose_record_turn_takes_no_state_gets_the_reservation_apart(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    store = OlderStore()
    assert not takes_state(store)
    result = await _kernel(workspace, make_kernel, store).run("a", "go")
    assert (result.status, result.reply) == ("completed", "done")
    key = f"effects:{result.run_id}"
    assert store.writes == [
        ("turn", ["user"]),
        ("turn", ["assistant"]),
        ("state", key),
        ("turn", ["tool"]),
        ("turn", ["assistant"]),
    ]
