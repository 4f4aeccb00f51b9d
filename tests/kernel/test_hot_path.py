"""The turn's hot path: events nobody reads are not built.

Every reader of an event still gets it (decision 0042), a recorder or a plugin registered
later included, while a kernel with none builds none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy
import trio

from soulacy.kernel import Event, Kernel, hookimpl
from soulacy.testing import HookRecorder, Workspace, throwaway_plugin

hookspec = pluggy.HookspecMarker("soulacy")
impl = pluggy.HookimplMarker("soulacy")


class Specs:
    @hookspec
    def soulacy_each(self, x: int) -> int:  # type: ignore[empty-body]
        """Every answer."""

    @hookspec(firstresult=True)
    def soulacy_first(self, x: int) -> int | None:
        """The first answer."""


def manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager("soulacy")
    pm.add_hookspecs(Specs)
    return pm


class Answer:
    def __init__(self, value: int | None, **opts: bool) -> None:
        self.value = value

        @impl(**opts)
        def soulacy_each(x: int) -> int | None:
            return None if value is None else value + x

        @impl(**opts)
        def soulacy_first(x: int) -> int | None:
            return None if value is None else value + x

        self.soulacy_each, self.soulacy_first = soulacy_each, soulacy_first


def _kernel(workspace: Workspace, make_kernel: Callable[..., Kernel], *plugins: Any) -> Kernel:
    workspace.scripted_agent("a", [{"text": "hello"}])
    return make_kernel(plugins=["no:sqlite_store"], extra_plugins=list(plugins))


async def test_a_kernel_that_serves_nothing_builds_no_event(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = _kernel(workspace, make_kernel)
    # The builtins read events only while they serve (http, portal) or hold a reservation
    # (costs): a run here has no reader, so the engine builds none of its events.
    assert not any(
        kernel.events.wants(t) for t in ("run.started", "llm.call", "tool.result", "run.completed")
    )
    result = await kernel.run("a", "hi")
    assert result.status == "completed"


async def test_every_kind_of_reader_gets_the_events_it_reads(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    hooked: list[str] = []

    @hookimpl
    def soulacy_event(kernel: Kernel, event: Event) -> None:
        hooked.append(event.type)

    kernel = _kernel(workspace, make_kernel)
    typed: list[str] = []
    every: list[str] = []
    stop_typed = kernel.events.observe(lambda e: typed.append(e.type), ["llm.result"])
    stop_every = kernel.events.observe(lambda e: every.append(e.type))
    assert kernel.events.wants("llm.result")
    assert kernel.events.wants("run.started")
    await kernel.run("a", "hi")
    assert typed == ["llm.result"]
    assert every == ["run.started", "run.limits", "llm.call", "llm.result", "run.completed"]
    stop_typed()
    stop_every()
    assert not kernel.events.wants("llm.result")

    # A plugin registered later (as pluggy allows) reads every event from its first run on.
    kernel.pm.register(throwaway_plugin("late", soulacy_event=soulacy_event))
    assert kernel.events.wants("tool.call")
    channel = kernel.events.subscribe(buffer=float("inf"))
    await kernel.run("a", "hi")
    assert hooked == every
    received = []
    while True:
        try:
            received.append(channel.receive_nowait().type)
        except trio.WouldBlock:
            break
    assert received == every


async def test_an_async_observer_is_awaited_before_subscribers_get_the_event(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = _kernel(workspace, make_kernel)
    order: list[str] = []

    async def slow(event: Event) -> None:
        await trio.sleep(0.01)
        order.append(f"observed {event.type}")

    kernel.events.observe(slow, ["run.completed"])
    channel = kernel.events.subscribe(buffer=float("inf"))
    await kernel.run("a", "hi")
    while True:
        try:
            event = channel.receive_nowait()
        except trio.WouldBlock:
            break
        if event.type == "run.completed":
            order.append("subscriber")
    assert order == ["observed run.completed", "subscriber"]


async def test_a_recorded_kernel_builds_every_event_for_its_recorder(
    workspace: Workspace, make_kernel: Callable[..., Kernel], hook_recorder: HookRecorder
) -> None:
    # A test that records hook calls (or SOULACY_TRACE_PLUGINS) sees soulacy_event called for
    # every event, as it always did, even though no plugin implements it.
    kernel = _kernel(workspace, make_kernel)
    assert kernel.events.wants("tool.call")
    await kernel.run("a", "hi")
    seen = [call.event.type for call in hook_recorder.getcalls("soulacy_event")]
    assert seen == ["run.started", "run.limits", "llm.call", "llm.result", "run.completed"]


def test_provider_types_are_collected_again_when_their_plugins_change(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    from soulacy.kernel.providers import ProviderType

    kernel = _kernel(workspace, make_kernel)
    before = kernel.provider_types()
    assert "late" not in before
    before["mutated"] = before["scripted"]  # a copy: the kernel's own answer is not changed
    assert "mutated" not in kernel.provider_types()

    late = ProviderType("late", lambda name, config, kernel: None)  # type: ignore[arg-type,return-value]
    plugin = throwaway_plugin("late", soulacy_provider_types=lambda: [late])
    kernel.pm.register(plugin)
    assert kernel.provider_types()["late"] is late
    kernel.pm.unregister(plugin)
    assert "late" not in kernel.provider_types()
