"""A workflow run holds the lease ``run:RUN_ID``: taken over once it expires, on any host, and
a stale owner's fenced checkpoint writes are refused (it ends ``failed (lease_lost)``)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool, UsageError
from soulacy.kernel.store import Lease, LeaseOwner
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.workflows import lease_key, reconcile
from soulacy.testing import Workspace, throwaway_plugin

LEASES = "leases: {ttl: 100ms, heartbeat: 30ms}\n"
WORKFLOW = {
    "steps": [
        {"id": "fetch", "tool": "fetch", "arguments": {"url": "{input}"}},
        {"id": "store", "tool": "store_it", "arguments": {"data": "{steps.fetch.result}"}},
    ]
}
ELSEWHERE = LeaseOwner("kernel-elsewhere", 4242, "elsewhere")  # never provably gone from here


class Tools:
    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.gate = trio.Event()
        self.gate.set()
        self.store_started = trio.Event()

    def plugin(self) -> Any:
        def fetch(url: str) -> dict[str, Any]:
            """Fetch a URL."""
            self.count["fetch"] += 1
            return {"status": 200, "url": url, "items": [1, 2, 3]}

        async def store_it(data: dict[str, Any]) -> str:
            """Store data."""
            self.count["store"] += 1
            self.store_started.set()
            await self.gate.wait()
            return f"stored {len(data['items'])} items"

        tools = [Tool.from_function(f) for f in (fetch, store_it)]
        return throwaway_plugin("tools", soulacy_tools=lambda kernel, agent_id: tools)


class Stalling:
    """One kernel's view of a store shared with another kernel, whose lease renewals can be
    stalled: the kernel goes on, but renews nothing, like a process stopped past its leases."""

    def __init__(self, shared: MemoryStore) -> None:
        self._shared = shared
        self._thaw: trio.Event | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shared, name)

    def stall(self) -> None:
        self._thaw = trio.Event()

    def resume(self) -> None:
        if self._thaw is not None:
            self._thaw.set()

    async def renew_leases(self, leases: Sequence[Lease], ttl: float) -> list[Lease]:
        if self._thaw is not None:
            await self._thaw.wait()
        return await self._shared.renew_leases(leases, ttl)


@pytest.fixture
def tools() -> Tools:
    return Tools()


def drain(events: trio.MemoryReceiveChannel[Event]) -> list[Event]:
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            return seen


async def test_a_step_lease_held_elsewhere_refuses_then_is_taken_over_once_expired(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.write_config(LEASES)
    workspace.write_agent("wf", {"tools": ["fetch", "store_it"], "workflow": WORKFLOW})
    kernel = make_kernel(extra_plugins=[tools.plugin()], plugins=["no:sqlite_store"])
    store = kernel.store()
    key = lease_key("R")
    assert (await store.acquire_lease(key, ELSEWHERE, 3600, holder="R")).acquired

    # Live on another host: refused at once (not waited for), and nothing ran.
    refused = await kernel.run("wf", "u", run_id="R", session_id="s")
    assert (refused.status, refused.incomplete_reason) == ("failed", "run_in_progress")
    assert "pid 4242 on elsewhere" in str(refused.error)
    assert tools.count == {}

    # That host stops renewing: its lease expires (by the store's clock), and is taken over.
    assert (await store.acquire_lease(key, ELSEWHERE, 0.05, holder="R")).acquired
    await trio.sleep(0.1)
    events = kernel.events.subscribe(math.inf)
    done = await kernel.run("wf", "u", run_id="R", session_id="s")
    assert (done.status, done.reply) == ("completed", "stored 3 items")
    assert tools.count == {"fetch": 1, "store": 1}
    taken = [e for e in drain(events) if e.type == "run.claim_taken_over"]
    assert [(e.data["key"], e.data["from"]) for e in taken] == [(key, attrs.asdict(ELSEWHERE))]
    assert taken[0].data["expired"] is True
    assert taken[0].data["lease"]["holder"] == "R"
    assert await store.get_lease(key) is None  # released when the workflow ended


async def test_a_stale_step_owner_cannot_write_its_checkpoint(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.write_config(LEASES)
    workspace.write_agent("wf", {"tools": ["fetch", "store_it"], "workflow": WORKFLOW})
    shared = MemoryStore()
    views = Stalling(shared), Stalling(shared)

    def on(view: Stalling) -> Kernel:
        shared_store = throwaway_plugin("shared", soulacy_store=lambda kernel: view)
        return make_kernel(
            extra_plugins=[tools.plugin(), shared_store], plugins=["no:sqlite_store"]
        )

    first, second = on(views[0]), on(views[1])
    tools.gate = trio.Event()  # the first kernel's step "store" waits in its external action
    results = {}
    events = second.events.subscribe(math.inf)

    async def stale() -> None:
        results["first"] = await first.run("wf", "u", run_id="R", session_id="s")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stale)
        await tools.store_started.wait()
        views[0].stall()  # the first kernel stops renewing: its leases expire after 100 ms
        # The second kernel takes the conversation's and the step's leases over once they
        # expired; it finds the step in progress and refuses, as a retry after a crash does.
        results["second"] = await second.run("wf", "u", run_id="R", session_id="s")
        tools.gate.set()  # the stale owner's action returns: its "completed" write is fenced
    views[0].resume()

    retry = results["second"]
    assert (retry.status, retry.incomplete_reason) == ("failed", "needs_reconciliation")
    taken = [e for e in drain(events) if e.type == "run.claim_taken_over"]
    assert [e.data["from"] for e in taken] == [attrs.asdict(first.owner)]
    assert taken[0].data["expired"] is True
    stale_result = results["first"]
    assert (stale_result.status, stale_result.incomplete_reason) == ("failed", "lease_lost")
    assert "the lease of 'run:R'" in str(stale_result.error)  # refused at its checkpoint
    saved = {c.step_id: c.status for c in await shared.load_checkpoints("R")}
    assert saved == {"fetch": "completed", "store": "in_progress"}  # its write was refused
    assert tools.count == {"fetch": 1, "store": 1}


async def test_reconcile_waits_for_no_live_owner(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tools: Tools
) -> None:
    workspace.write_agent("wf", {"tools": ["fetch", "store_it"], "workflow": WORKFLOW})
    kernel = make_kernel(extra_plugins=[tools.plugin()], plugins=["no:sqlite_store"])
    tools.gate = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("wf", "u", run_id="R", session_id="s"))
        await tools.store_started.wait()
        with pytest.raises(UsageError, match="is running"):
            await reconcile(kernel, "R", "store", "completed")
        tools.gate.set()
    saved = {c.step_id: c.status for c in await kernel.store().load_checkpoints("R")}
    assert saved == {"fetch": "completed", "store": "completed"}
