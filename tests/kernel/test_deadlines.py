"""Run deadlines as numbers and one watchdog (docs/decisions/0046): a turn opens a cancel scope
only for its tool call, and every timeout still fires when it is due, for concurrent calls, and
in a later Trio run of the same kernel."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message
from soulacy.testing import Workspace, throwaway_plugin


async def slow() -> str:
    """Takes ten minutes."""
    await trio.sleep(600)
    return "done"


async def same(n: int) -> str:
    """Returns the same evidence whatever the argument."""
    return "nothing new"


async def read(path: str) -> str:
    """Read a file (async: a worker thread would let the autojump clock run to its timeout)."""
    return f"contents of {path}"


TRIO = Path(trio.__file__).parent

TOOLS = throwaway_plugin(
    "tools",
    soulacy_tools=lambda kernel, agent_id: [Tool.from_function(f) for f in (slow, read, same)],
)


@pytest.fixture
def load(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    def load(*plugins: Any) -> Kernel:
        return make_kernel(plugins=["no:sqlite_store"], extra_plugins=[TOOLS, *plugins])

    return load


def reads(n: int) -> list[dict[str, Any]]:
    return [{"tool": "read", "arguments": {"path": f"f{i}"}} for i in range(n)] + [{"text": "ok"}]


async def test_a_turn_opens_a_cancel_scope_for_its_tool_call_only(
    workspace: Workspace, load: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Finite step, model and tool timeouts (the defaults are finite too): before the watchdog
    # each tool turn entered three scopes, the step's, the model call's and the tool call's.
    workspace.write_config("runtime:\n  timeouts: {step: 10m, llm: 5m, tool: 2m}\n")
    workspace.scripted_agent("short", reads(5), tools=["read"])
    workspace.scripted_agent("long", reads(25), tools=["read"])
    workspace.scripted_agent("warm", reads(1), tools=["read"])
    kernel = load()
    made: list[Any] = []
    real = trio.CancelScope

    def counting(*args: Any, **kwargs: Any) -> trio.CancelScope:
        scope = real(*args, **kwargs)
        # Trio's own (trio.sleep's, a lease renewal's at its heartbeat) are not the turn's, nor
        # the watchdog's sleep: at most one a run, made when the watchdog (re)starts, which
        # depends on whether the last run's watchdog had ended yet (a race on a loaded machine).
        made_in = Path(sys._getframe(1).f_code.co_filename)
        if TRIO not in made_in.parents and made_in.name != "_deadlines.py":
            made.append(scope)
        return scope

    counts = []
    await kernel.run("warm", "go")  # the watchdog starts (its sleep is a scope)
    for agent in ("short", "long"):
        monkeypatch.setattr(trio, "CancelScope", counting)
        result = await kernel.run(agent, "go")
        monkeypatch.setattr(trio, "CancelScope", real)
        assert (result.status, result.tool_calls) == ("completed", 5 if agent == "short" else 25)
        counts.append(len(made))
        made.clear()
    assert counts[1] - counts[0] == 20  # one per tool call, none per step or model call


async def test_a_tool_timeout_shorter_than_the_step_fires_when_it_is_due(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    # The watchdog sleeps until the step's deadline (1h) when the tool call starts: the
    # tool's (1m) is earlier and must wake it, not wait for the hour.
    workspace.write_config("runtime:\n  timeouts: {step: 1h, llm: 1h, tool: 1m}\n")
    workspace.scripted_agent("a", [{"tool": "slow"}, {"text": "moved on"}], tools=["slow"])
    began = trio.current_time()
    result = await load().run("a", "go")
    assert (result.status, result.reply) == ("completed", "moved on")
    assert trio.current_time() - began == pytest.approx(60, abs=1)


async def test_concurrent_tool_calls_of_one_run_each_time_out(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    # A strategy may call tools concurrently: the first takes the run's tool slot, the second
    # a scope of its own; both time out after the tool timeout, and the run goes on.
    workspace.write_config("runtime:\n  timeouts: {tool: 1m}\n")
    workspace.scripted_agent("a", [{"text": "unused"}], tools=["slow", "read"])
    outcomes: list[Any] = []

    async def both(run: Run) -> None:
        async with trio.open_nursery() as nursery:
            for n in range(2):

                async def call(n: int = n) -> None:
                    outcomes.append(await run.call_tool("slow", {}, f"c{n}"))

                nursery.start_soon(call)
        outcomes.append(await run.call_tool("read", {"path": "x"}, "c2"))
        run.complete("both timed out")

    strategy = throwaway_plugin("both", soulacy_run_strategy=lambda kernel, run: both)
    began = trio.current_time()
    result = await load(strategy).run("a", "go")
    assert (result.status, result.reply) == ("completed", "both timed out")
    assert [o.content for o in outcomes[:2]] == ["error: tool 'slow' timed out after 60.0s"] * 2
    assert (outcomes[2].content, outcomes[2].is_error) == ("contents of x", False)
    assert trio.current_time() - began == pytest.approx(60, abs=1)


def test_the_watchdog_serves_a_later_trio_run_of_the_same_kernel(workspace: Workspace) -> None:
    # It is a system task of the Trio run it started in: that run's end stops it, and the
    # next Trio run's first run starts it again (else a timeout would never fire there).
    workspace.write_config("runtime:\n  timeouts: {tool: 1m}\n")
    workspace.scripted_agent(
        "a", [{"tool": "slow"}, {"text": "moved on"}], tools=["slow"], repeat=True
    )
    kernel = Kernel.load(
        workspace.path, plugins=["no:sqlite_store"], extra_plugins=[TOOLS], autoload=False
    )

    async def once() -> tuple[str, float]:
        began = trio.current_time()
        result = await kernel.run("a", "go")
        assert result.status == "completed"
        history = await kernel.store().load_history("a", result.session_id)
        (tool,) = [m.content for m in history if m.role == "tool"]
        return tool, trio.current_time() - began

    for _ in range(2):
        clock = trio.testing.MockClock(autojump_threshold=0)
        text, took = trio.run(once, clock=clock)
        assert "timed out after 60.0s" in text
        assert took == pytest.approx(60, abs=1)


# A step's or a model call's timeout stops what the strategy does, as a RunStop it may catch:
# the tool loop's one scope (Run.timeouts) raises it, and a model call outside any block makes
# a scope of its own.


async def test_a_strategy_can_catch_an_llm_timeout_and_fall_back(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config("runtime:\n  timeouts: {tool: 30s, llm: 1m}\n")
    workspace.scripted_agent("a", [{"text": "late", "sleep": 120}])

    reasons: list[str | None] = []

    async def fallback(run: Run) -> None:
        with pytest.raises(RunStop) as stopped:
            await run.call_model()
        reasons.append(stopped.value.reason)
        run.complete("fallback answer")

    strategy = throwaway_plugin("fallback", soulacy_run_strategy=lambda kernel, run: fallback)
    result = await load(strategy).run("a", "go")
    assert (result.status, result.reply, reasons) == (
        "completed",
        "fallback answer",
        ["llm_timeout"],
    )


async def test_a_strategy_can_catch_the_tool_loops_step_timeout(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config("runtime:\n  timeouts: {step: 90s, tool: 1m, llm: 1m}\n")
    workspace.scripted_agent(
        "a", [{"tool_calls": [{"tool": "slow"}, {"tool": "slow"}]}], tools=["slow"]
    )

    async def wrapped(run: Run) -> None:
        with pytest.raises(RunStop) as stopped:
            await run.tool_loop()
        run.complete(f"gave up politely ({stopped.value.reason})")

    strategy = throwaway_plugin("wrapped", soulacy_run_strategy=lambda kernel, run: wrapped)
    result = await load(strategy).run("a", "go")
    assert (result.status, result.reply) == ("completed", "gave up politely (step_timeout)")


async def test_the_tool_loop_leaves_no_step_deadline_behind(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    # The loop stops with no_progress 30 s into a 60 s step; the strategy's own 40 s model call
    # after it is no part of that step.
    workspace.write_config("runtime:\n  timeouts: {tool: 30s, llm: 60s, step: 60s}\n")
    workspace.scripted_agent(
        "a",
        [{"tool": "same", "arguments": {"n": 1}}] * 2
        + [{"tool": "same", "arguments": {"n": 1}, "sleep": 30}, {"text": "summary", "sleep": 40}],
        tools=["same"],
        no_progress_limit=3,
    )

    async def recover(run: Run) -> None:
        with pytest.raises(RunStop, match="no_progress"):
            await run.tool_loop()
        run.messages.append(Message("user", "Summarize what you found."))
        run.complete((await run.call_model(tools=False)).message.content)

    strategy = throwaway_plugin("recover", soulacy_run_strategy=lambda kernel, run: recover)
    result = await load(strategy).run("a", "go")
    assert (result.status, result.reply) == ("completed", "summary")


async def test_run_step_scope_is_gone_with_a_clear_error(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "ok"}])
    seen: list[str] = []

    async def old_style(run: Run) -> None:
        with pytest.raises(AttributeError, match="start_step") as raised:
            run.step_scope = trio.CancelScope()
        seen.append(str(raised.value))
        run.complete("ok")

    strategy = throwaway_plugin("old", soulacy_run_strategy=lambda kernel, run: old_style)
    assert (await load(strategy).run("a", "go")).status == "completed"
    assert len(seen) == 1
    assert "0046" in seen[0]


async def test_a_watchdog_whose_last_clock_is_forgotten_ends_when_it_runs() -> None:
    """A run that never blocked, of a kernel that is not open, forgets its clock before its own
    watchdog's task first runs: that task ends at once instead of sleeping until a deadline
    that no longer applies (and being cancelled with the run's nursery)."""
    from soulacy.plugins.engine._deadlines import INF, RunClock, Watchdog

    started: list[Callable[[], Any]] = []

    def start(async_fn: Callable[[], Any], *, name: str | None = None) -> bool:
        started.append(async_fn)
        return True

    watchdog = Watchdog(start)
    clock = RunClock(watchdog)
    watchdog.watch(clock, trio.CancelScope())
    clock.step = clock.due(600)  # a step's deadline, ten minutes away
    assert watchdog.wake < INF
    watchdog.forget(clock)
    assert watchdog.wake == INF
    with trio.move_on_after(5) as guard:  # not a timing: it sleeps 600 s if it does not end
        await started[0]()
    assert not guard.cancelled_caught
