"""Every seam of a run can be swapped by a plugin alone (Step 15, "Done when").

For each seam a test blocks the builtin (``-p no:NAME``) and proves that a replacement from a
throwaway plugin carries a real run; for the roles a run cannot do without (policy, run
strategy, compactor, progress detection while a stall limit is set, storage), blocking the
builtin with no replacement is a PluginError that names the hook, never a silent default.
Transport and scheduling are optional: a kernel with neither serves embedded runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing

from soulacy.kernel import Kernel, PluginError, Tool, open_kernel
from soulacy.kernel.contracts import Verdict
from soulacy.kernel.engine import Run
from soulacy.kernel.messages import Message, ToolSpec
from soulacy.kernel.policy import CORE_LIMITS, ExecutionPolicy, Limit
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import Workspace, participant_plugin, throwaway_plugin

MEMORY = "no:sqlite_store"  # these runs keep their history in memory


def no_answer(hook: str) -> str:
    return rf"no loaded plugin answered {hook} \("


def read_tool() -> Any:
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    return throwaway_plugin("reader", soulacy_tools=lambda: [Tool.from_function(read)])


# -- policy resolution ------------------------------------------------------------------------


def policy_of(agent_id: str, **values: int | float | None) -> ExecutionPolicy:
    limits: dict[str, Any] = {name: Limit(values.get(name), "house policy") for name in CORE_LIMITS}
    return ExecutionPolicy(agent_id, **limits)


async def test_a_replacement_policy_resolves_the_limits_a_run_obeys(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    steps = [{"tool": "read", "arguments": {"path": "x"}}]
    workspace.scripted_agent("a", steps, repeat=True, tools=["read"])
    house = throwaway_plugin(
        "house", soulacy_resolve_policy=lambda agent_id: policy_of(agent_id, max_turns=2)
    )
    kernel = make_kernel(
        plugins=["no:policy", "no:reasoning", "no:costs", MEMORY],
        extra_plugins=[house, read_tool()],
    )
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason, result.turns) == (
        "incomplete",
        "max_turns",
        2,
    )
    assert kernel.resolve_policy("a").max_turns.source == "house policy"


async def test_without_a_policy_plugin_a_run_is_refused(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:policy", "no:reasoning", "no:costs", MEMORY])
    with pytest.raises(PluginError, match="no loaded plugin resolves execution policy"):
        await kernel.run("a", "go")


# -- run strategy: the classic loop itself ----------------------------------------------------


async def test_a_replacement_run_strategy_drives_the_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async def one_shot(run: Run) -> None:
        await run.turn()
        reply = await run.call_model(tools=False)
        run.complete(f"one shot: {reply.message.content}")

    plugin = throwaway_plugin("oneshot", soulacy_run_strategy=lambda run: one_shot)
    workspace.scripted_agent("a", [{"text": "Let me check."}], repeat=True)
    kernel = make_kernel(plugins=["no:classic", MEMORY], extra_plugins=[plugin])
    result = await kernel.run("a", "go")
    # The classic loop would have nudged this progress-only reply; the replacement takes it.
    assert (result.status, result.reply, result.llm_calls) == (
        "completed",
        "one shot: Let me check.",
        1,
    )
    history = await kernel.store().load_history("a", result.session_id)
    assert [m.role for m in history] == ["user", "assistant"]


async def test_a_replacement_tool_loop_serves_run_tool_loop(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    seen: list[str] = []

    async def loop(run: Run, limit: Literal["turns", "steps"]) -> None:
        seen.append(limit)
        await run.turn(limit)
        run.complete((await run.call_model()).message.content)

    plugin = throwaway_plugin("myloop", soulacy_tool_loop=lambda run: loop)
    workspace.scripted_agent("a", [{"text": "done"}], reasoning={"strategy": "react"})
    kernel = make_kernel(plugins=["no:classic", MEMORY], extra_plugins=[plugin])
    result = await kernel.run("a", "go")  # the reasoning plugin's react calls run.tool_loop
    assert (result.status, result.reply, seen) == ("completed", "done", ["steps"])


async def test_without_a_run_strategy_the_run_fails_naming_the_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:classic", MEMORY])
    with pytest.raises(PluginError, match=no_answer("soulacy_run_strategy")) as info:
        await kernel.run("a", "go")
    assert "'classic'" in str(info.value)


async def test_without_a_tool_loop_run_tool_loop_fails_naming_the_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async def strategy(run: Run) -> None:
        await run.tool_loop()

    plugin = throwaway_plugin("looper", soulacy_run_strategy=lambda run: strategy)
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:classic", MEMORY], extra_plugins=[plugin])
    with pytest.raises(PluginError, match=no_answer("soulacy_tool_loop")):
        await kernel.run("a", "go")


# -- compaction -------------------------------------------------------------------------------


class LastTwo:
    """Sends the system prompt and the newest two messages, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]:
        self.calls += 1
        return list(messages[-2:])


async def test_a_replacement_compactor_builds_every_view(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    compactor = LastTwo()
    plugin = throwaway_plugin("lasttwo", soulacy_compactor=lambda run: compactor)
    steps: list[dict[str, Any]] = [{"tool": "read", "arguments": {"path": "x"}}, {"text": "done"}]
    workspace.scripted_agent("a", steps, tools=["read"])
    kernel = make_kernel(
        plugins=["no:compaction", "no:passthrough", MEMORY], extra_plugins=[plugin, read_tool()]
    )
    result = await kernel.run("a", "go")
    assert (result.status, result.reply, compactor.calls) == ("completed", "done", 2)


async def test_a_compactor_under_the_deprecated_factory_name_is_still_asked_first(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    compactor = LastTwo()
    plugin = throwaway_plugin("old", soulacy_make_compactor=lambda run: compactor)
    workspace.scripted_agent("a", [{"text": "hi"}])
    with pytest.warns(DeprecationWarning, match="renamed soulacy_compactor"):
        kernel = make_kernel(plugins=[MEMORY], extra_plugins=[plugin])  # compaction loaded
    result = await kernel.run("a", "go")
    assert (result.status, compactor.calls) == ("completed", 1)


def test_factory_hooks_are_named_by_their_role() -> None:
    """One naming rule (docs/hooks.md's conventions): a hook returning the object that plays
    a role is named by the role, never by a verb; the old verbs are deprecated aliases, which
    the engine (that still asks them) defines."""
    from soulacy.kernel import hookspecs
    from soulacy.plugins.engine import hookspecs as deprecated

    verbs = re.compile(r"^soulacy_(make|get|create|build|new)_")
    assert [name for name in vars(hookspecs) if verbs.match(name)] == []
    named = [name for name in vars(deprecated) if verbs.match(name)]
    assert sorted(named) == ["soulacy_make_compactor", "soulacy_make_progress_detector"]
    for name in named:  # pluggy keeps a spec's options as <project>_spec
        assert getattr(deprecated, name).soulacy_spec["warn_on_impl"], name
        assert hasattr(hookspecs, name.replace("_make_", "_", 1)), name


async def test_without_a_compactor_the_run_fails_naming_the_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:compaction", "no:passthrough", MEMORY])
    with pytest.raises(PluginError, match=no_answer("soulacy_compactor")):
        await kernel.run("a", "go")


# -- progress detection, the idle stop included -----------------------------------------------


class TwoIdleReplies:
    """Stalls a run at its second reply that is not an answer; every tool result is progress."""

    def __init__(self) -> None:
        self.idle: list[str] = []

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict:
        return Verdict("progress")

    def observe_reply(self, text: str) -> Verdict:
        self.idle.append(text)
        if len(self.idle) == 2:
            return Verdict("stalled", evidence={"mine": self.idle})
        return Verdict("repeated")


async def test_a_replacement_detector_owns_the_idle_stop(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    detector = TwoIdleReplies()
    plugin = throwaway_plugin("idle", soulacy_progress_detector=lambda run: detector)
    # The policy's no_progress_limit (20 by default) is the builtin detector's threshold, not
    # this one's: it stops at the second idle reply.
    workspace.scripted_agent("a", [{"text": "Let me check."}], repeat=True, max_turns=-1)
    kernel = make_kernel(plugins=["no:progress", MEMORY], extra_plugins=[plugin])
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason, result.turns) == (
        "incomplete",
        "no_progress",
        2,
    )
    assert result.evidence == {"mine": ["Let me check.", "Let me check."]}


async def test_the_builtin_detector_stops_idle_replies_at_the_policy_limit(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": ""}], repeat=True, max_turns=-1, no_progress_limit=3)
    result = await make_kernel(plugins=[MEMORY]).run("a", "go")
    assert (result.incomplete_reason, result.turns) == ("no_progress", 3)
    assert result.evidence == {"idle_replies": 3, "last_reply": ""}


async def test_without_a_detector_a_stall_limit_cannot_be_enforced(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:progress", MEMORY])
    with pytest.raises(PluginError, match=no_answer("soulacy_progress_detector")):
        await kernel.run("a", "go")


async def test_without_a_detector_a_run_without_a_stall_limit_goes_on(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}], no_progress_limit=0)
    result = await make_kernel(plugins=["no:progress", MEMORY]).run("a", "go")
    assert (result.status, result.reply) == ("completed", "hi")


# -- storage ----------------------------------------------------------------------------------


class HouseStore(MemoryStore):
    """Another store: the in-memory one under another name, counting the turns it records."""

    def __init__(self) -> None:
        super().__init__()
        self.turns = 0

    async def record_turn(self, run: Any, messages: Any, tools: Any, fence: Any = None) -> None:
        self.turns += 1
        await super().record_turn(run, messages, tools, fence)


async def test_a_replacement_store_keeps_history_runs_and_proofs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    store = HouseStore()
    plugin = throwaway_plugin("house", soulacy_store=lambda: store)
    workspace.scripted_agent("a", [{"text": "kept"}])
    kernel = make_kernel(plugins=["no:sqlite_store", "no:memory_store"], extra_plugins=[plugin])
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert store.turns  # the replacement recorded the run's turns
    assert result.proof is not None
    assert await store.get_proof(result.run_id) is not None
    entries = await store.history(result.session_id)
    assert [e.content for e in entries] == ["go", "kept"]


async def test_without_a_store_using_it_is_an_error(make_kernel: Callable[..., Kernel]) -> None:
    kernel = make_kernel(plugins=["no:sqlite_store", "no:memory_store"])
    with pytest.raises(PluginError, match=no_answer("soulacy_store")):
        kernel.store()


async def test_without_a_store_a_run_fails_before_anything_happens(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel(plugins=["no:sqlite_store", "no:memory_store"])
    with pytest.raises(PluginError, match=no_answer("soulacy_store")):
        await kernel.run("a", "go")


# -- transport --------------------------------------------------------------------------------


@attrs.define
class ChannelTransport:
    """A throwaway transport: requests arrive on a memory channel, replies go back on one."""

    kernel: Kernel
    name: str = "channels"
    requests: Any = None
    replies: Any = None

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        send, receive = trio.open_memory_channel[tuple[str, str]](8)
        out_send, self.replies = trio.open_memory_channel[str](8)
        self.requests = send
        task_status.started(self)
        async with receive, out_send:
            async for agent_id, text in receive:
                result = await self.kernel.run(agent_id, text)
                await out_send.send(result.reply)


async def test_a_replacement_transport_serves_runs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "over the channel"}])
    plugin = throwaway_plugin(
        "channels", soulacy_services=lambda kernel: [ChannelTransport(kernel)]
    )
    kernel = make_kernel(plugins=["no:http", MEMORY], extra_plugins=[plugin])
    async with open_kernel(kernel=kernel):
        transport = kernel.started["channels"]
        await transport.requests.send(("a", "go"))
        assert await transport.replies.receive() == "over the channel"
        await transport.requests.aclose()
    assert [s.name for s in kernel.services() if s.name == "http"] == []


async def test_without_a_transport_a_kernel_still_runs_embedded(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "embedded"}])
    kernel = make_kernel(plugins=["no:http", "no:scheduler", MEMORY])
    async with open_kernel(kernel=kernel):
        assert kernel.services() == []
        assert (await kernel.run("a", "go")).reply == "embedded"


# -- scheduling -------------------------------------------------------------------------------


@attrs.define
class EveryHour:
    """A throwaway scheduler: runs one agent every hour of (test) time."""

    kernel: Kernel
    agent_id: str
    results: list[str] = attrs.Factory(list)
    name: str = "hourly"

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(3600):  # an hour, or the kernel's stop, whichever is first
                await self.kernel.stopping.wait()
                return
            self.results.append((await self.kernel.run(self.agent_id, "tick")).status)


async def test_a_replacement_scheduler_runs_agents_on_its_own_clock(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
) -> None:
    workspace.scripted_agent("a", [{"text": "ticked"}], repeat=True)
    kernel = make_kernel(plugins=["no:scheduler", "no:http", MEMORY])
    hourly = EveryHour(kernel, "a")
    kernel.pm.register(throwaway_plugin("hourly", soulacy_services=lambda: [hourly]))
    async with open_kernel(kernel=kernel):
        await trio.sleep(3 * 3600 + 1)
    assert hourly.results == ["completed"] * 3
    assert "scheduler" not in [s.name for s in kernel.services()]


def test_plugins_contribute_schedules_through_the_schedulers_own_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    from soulacy.plugins.scheduler import Schedule, ScheduleEntry, schedules

    workspace.scripted_agent("a", [{"text": "x"}])
    entry = ScheduleEntry("monitor", "a", Schedule(cron="*/5 * * * *"))
    kernel = make_kernel(
        extra_plugins=[throwaway_plugin("monitors", soulacy_schedules=lambda: [entry])]
    )
    assert schedules(kernel) == [entry]
    assert "soulacy_schedules" not in _kernel_hookspecs()  # the scheduler's, not the kernel's


# -- lifecycle and collected hooks ------------------------------------------------------------


@pytest.mark.parametrize("order", ["deny first", "allow first"])
async def test_one_plugins_deny_wins_over_another_plugins_allow(
    workspace: Workspace, make_kernel: Callable[..., Kernel], order: str
) -> None:
    allow = participant_plugin("allow", before_tool_call=lambda run, call: None)
    deny = participant_plugin(
        "deny",
        before_tool_call=lambda run, call: (
            f"permission denied for tool {call.name!r}" if call.name == "read" else None
        ),
    )
    plugins = [deny, allow] if order == "deny first" else [allow, deny]
    steps: list[dict[str, Any]] = [{"tool": "read", "arguments": {"path": "x"}}, {"text": "done"}]
    workspace.scripted_agent("a", steps, tools=["read"])
    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), *plugins])
    result = await kernel.run("a", "go")
    history = await kernel.store().load_history("a", result.session_id)
    assert history[2].content == "error: permission denied for tool 'read'"
    assert history[2].is_error


def test_a_plugin_registered_after_configure_is_still_configured(
    make_kernel: Callable[..., Kernel],
) -> None:
    kernel = make_kernel()
    configured: list[Kernel] = []
    kernel.pm.register(
        throwaway_plugin("late", soulacy_configure=lambda kernel: configured.append(kernel))
    )
    assert configured == [kernel]


async def test_the_close_hook_is_awaited_for_every_plugin_even_after_a_failure(
    make_kernel: Callable[..., Kernel],
) -> None:
    closed: list[str] = []

    async def close_async(kernel: Kernel) -> None:
        await trio.lowlevel.checkpoint()
        closed.append("async")

    def close_failing(kernel: Kernel) -> None:
        raise RuntimeError("could not close")

    kernel = make_kernel(
        plugins=["no:http", "no:scheduler"],
        extra_plugins=[
            throwaway_plugin("a", soulacy_unconfigure=close_async),
            throwaway_plugin("b", soulacy_unconfigure=lambda kernel: closed.append("sync")),
        ],
    )
    async with open_kernel(kernel=kernel):
        pass
    assert sorted(closed) == ["async", "sync"]
    kernel.pm.register(throwaway_plugin("c", soulacy_unconfigure=close_failing))
    with pytest.raises(RuntimeError, match="could not close"):
        await kernel.aclose()
    assert sorted(closed) == ["async", "async", "sync", "sync"]


async def test_file_tools_come_through_the_tools_hook(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "a",
        [{"tool": "shout", "arguments": {"text": "hi"}}, {"text": "done"}],
        tools=["tools.py:shout"],
    )
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        'def shout(text: str) -> str:\n    """Shout."""\n    return text.upper()\n'
    )
    result = await make_kernel(plugins=[MEMORY]).run("a", "go")
    assert (result.status, result.tool_calls) == ("completed", 1)
    blocked = make_kernel(plugins=[MEMORY, "no:file_tools"])
    with pytest.raises(Exception, match=re.escape("the builtin 'file_tools' plugin's")):
        await blocked.run("a", "go")


def test_the_kernel_calls_no_implementation_one_at_a_time() -> None:
    """Collected hooks go through pluggy's hook execution, so tracing, monitoring and wrappers
    apply (``named_contributions`` when a contribution must name its plugin).

    ``_manager.first_result`` (which plugin answered, for ``soulacy plugins``) is introspection
    on purpose; the CLI's command collection is outside these files."""
    from pathlib import Path

    import soulacy.kernel as package
    import soulacy.plugins.engine as engine

    kernel_dir, engine_dir = Path(package.__file__).parent, Path(engine.__file__).parent
    files = [kernel_dir / n for n in ("_kernel.py", "_contracts.py", "_store.py", "_tools.py")]
    for file in [*files, *engine_dir.glob("*.py")]:
        calls = file.read_text().count("impl.function(")
        assert calls == 0, f"{file.name} calls a hook implementation directly"


# -- helpers ----------------------------------------------------------------------------------


def _kernel_hookspecs() -> set[str]:
    from soulacy.kernel import hookspecs

    return {name for name in dir(hookspecs) if name.startswith("soulacy_")}


def test_a_sibling_kernel_is_configured_without_joining_the_hooks_history(
    workspace: Workspace, make_kernel: Callable[..., Kernel], tmp_path: Any
) -> None:
    configured: list[Kernel] = []
    plugin = throwaway_plugin("seen", soulacy_configure=lambda kernel: configured.append(kernel))
    kernel = make_kernel(extra_plugins=[plugin])
    sibling = kernel.sibling(tmp_path)
    assert configured == [kernel, sibling]
    late: list[Kernel] = []
    kernel.pm.register(
        throwaway_plugin("late", soulacy_configure=lambda kernel: late.append(kernel))
    )
    assert late == [kernel]  # configured for the kernel that lasts, not for the sibling


# -- the tool loop of an ordinary run (Step 23) -----------------------------------------------


async def test_a_replacement_tool_loop_runs_an_ordinary_agents_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """The builtin ``classic`` strategy goes through ``run.tool_loop``: a plugin that answers
    ``soulacy_tool_loop`` first replaces the loop of every agent, not only reasoning's."""
    from soulacy.kernel import hookimpl

    seen: list[str] = []

    async def loop(run: Run, limit: Literal["turns", "steps"]) -> None:
        seen.append(limit)
        await run.turn(limit)
        run.complete(f"my loop: {(await run.call_model()).message.content}")

    class MyLoop:
        name = "myloop"

        @hookimpl(tryfirst=True)
        def soulacy_tool_loop(self, run: Run) -> Any:
            return loop

    workspace.scripted_agent("a", [{"text": "Let me check."}], repeat=True)
    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[MyLoop()])
    result = await kernel.run("a", "go")
    # The classic loop would have nudged this progress-only reply; the replacement takes it.
    assert (result.status, result.reply, result.llm_calls, seen) == (
        "completed",
        "my loop: Let me check.",
        1,
        ["turns"],
    )
