"""The classic tool loop under the resolved execution policy (seed: "Progress and completion",
"Delivery and long-running work", the turn-serialization paragraph)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import Event, Kernel, Tool
from soulacy.kernel.contracts import Verdict
from soulacy.kernel.store import ConversationKey
from soulacy.testing import Workspace, participant_plugin, throwaway_plugin


class ToolBox:
    """Tools that count their executions, contributed through the tools hook."""

    def __init__(self) -> None:
        self.executions: Counter[str] = Counter()
        self.release = trio.Event()

    def tools(self) -> list[Tool]:
        def read(path: str) -> str:
            """Read a file (returns a fresh value every time)."""
            self.executions["read"] += 1
            return f"contents #{self.executions['read']} of {path}"

        def fail(reason: str) -> str:
            """Always fails."""
            self.executions["fail"] += 1
            raise RuntimeError(reason)

        async def wait() -> str:
            """Blocks until the test releases it."""
            self.executions["wait"] += 1
            await self.release.wait()
            return "released"

        async def slow() -> str:
            """Takes ten minutes."""
            self.executions["slow"] += 1
            await trio.sleep(600)
            return "done"

        def same(n: int) -> str:
            """Returns the same evidence whatever the argument."""
            self.executions["same"] += 1
            return "nothing new"

        return [Tool.from_function(f) for f in (read, fail, wait, slow, same)]

    def plugin(self) -> Any:
        return throwaway_plugin("toolbox", soulacy_tools=lambda kernel, agent_id: self.tools())


@pytest.fixture
def toolbox() -> ToolBox:
    return ToolBox()


@pytest.fixture
def load(make_kernel: Callable[..., Kernel], toolbox: ToolBox) -> Callable[..., Kernel]:
    def load(*plugins: Any, **options: Any) -> Kernel:
        # The kernel's memory store: these tests are about the loop, not about SQLite.
        options.setdefault("plugins", ["no:sqlite_store"])
        return make_kernel(extra_plugins=[toolbox.plugin(), *plugins], **options)

    return load


ALL_TOOLS = ["read", "fail", "wait", "slow", "same"]


def record(kernel: Kernel) -> trio.MemoryReceiveChannel[Event]:
    return kernel.events.subscribe(buffer=float("inf"))


def drain(channel: trio.MemoryReceiveChannel[Event]) -> list[Event]:
    events = []
    while True:
        try:
            events.append(channel.receive_nowait())
        except trio.WouldBlock:
            return events


async def test_a_final_answer_completes_the_run_unverified(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "The answer is 42."}])
    kernel = load()
    events = record(kernel)
    result = await kernel.run("a", "question")
    assert (result.status, result.verification, result.reply) == (
        "completed",
        "unverified",
        "The answer is 42.",
    )
    assert [e.type for e in drain(events)] == [
        "run.started",
        "run.limits",
        "llm.call",
        "llm.result",
        "run.completed",
    ]


async def test_independent_call_ids_execute_fresh_even_when_arguments_match(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a",
        [
            {"tool": "read", "arguments": {"path": "x"}, "id": "c1"},
            {"tool": "read", "arguments": {"path": "x"}, "id": "c2"},
            {"text": "done"},
        ],
        tools=ALL_TOOLS,
    )
    kernel = load()
    result = await kernel.run("a", "read x twice")
    assert toolbox.executions["read"] == 2
    assert result.tool_calls == 2


async def test_a_replayed_call_id_reuses_its_result_and_its_failure_status(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a",
        [
            {"tool": "fail", "arguments": {"reason": "disk full"}, "id": "c1"},
            {"tool": "fail", "arguments": {"reason": "disk full"}, "id": "c1"},
            {"text": "gave up"},
        ],
        tools=ALL_TOOLS,
    )
    kernel = load()
    events = record(kernel)
    await kernel.run("a", "try")
    assert toolbox.executions["fail"] == 1
    results = [e.data for e in drain(events) if e.type == "tool.result"]
    assert [(r["replayed"], r["is_error"]) for r in results] == [(False, True), (True, True)]
    assert results[0]["preview"] == results[1]["preview"] == "error: RuntimeError: disk full"


async def test_bad_arguments_go_back_to_the_model_as_a_tool_error(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a",
        [
            {"tool": "read", "arguments": {"path": 5, "mode": "x"}},
            {"tool": "nope", "arguments": {}},
            {"text": "ok"},
        ],
        tools=ALL_TOOLS,
    )
    kernel = load()
    events = record(kernel)
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert toolbox.executions["read"] == 0
    previews = [e.data["preview"] for e in drain(events) if e.type == "tool.result"]
    assert previews[0].startswith("error: invalid arguments: ")
    assert sorted(previews[0].removeprefix("error: invalid arguments: ").split("; ")) == [
        "arguments.mode: unexpected argument",
        "arguments.path: expected string, got int",
    ]
    assert previews[1].startswith("error: unknown tool 'nope' (available: fail, read,")


async def test_a_denied_tool_call_is_an_error_result_not_an_execution(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a",
        [{"tool": "read", "arguments": {"path": "/etc/passwd"}}, {"text": "ok"}],
        tools=ALL_TOOLS,
    )
    deny = participant_plugin(
        "deny",
        before_tool_call=lambda run, call: (
            f"permission denied for tool {call.name!r}"
            if call.arguments.get("path") == "/etc/passwd"
            else None
        ),
    )
    kernel = load(deny)
    events = record(kernel)
    await kernel.run("a", "go")
    assert toolbox.executions["read"] == 0
    (result,) = [e.data for e in drain(events) if e.type == "tool.result"]
    assert result["preview"] == "error: permission denied for tool 'read'"


@pytest.mark.parametrize(
    ("keys", "steps", "reason"),
    [
        ({"max_turns": 3}, 10, "max_turns"),
        ({"budget": {"max_llm_calls": 2}}, 10, "max_llm_calls"),
        ({"budget": {"max_tokens": 50}}, 10, "max_tokens"),
    ],
)
async def test_exhausting_a_limit_is_incomplete_not_a_success_claim(
    workspace: Workspace,
    load: Callable[..., Kernel],
    keys: dict[str, Any],
    steps: int,
    reason: str,
) -> None:
    script = [
        {"tool": "read", "arguments": {"path": f"f{i}"}, "usage": {"input": 10, "output": 10}}
        for i in range(steps)
    ]
    workspace.scripted_agent("a", script, tools=ALL_TOOLS, **keys)
    result = await load().run("a", "loop")
    assert (result.status, result.incomplete_reason) == ("incomplete", reason)
    assert result.verification == "unverified"


async def test_max_turns_counts_model_turns(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    script = [{"tool": "read", "arguments": {"path": f"f{i}"}} for i in range(10)]
    workspace.scripted_agent("a", script, tools=ALL_TOOLS, max_turns=3)
    result = await load().run("a", "loop")
    assert (result.turns, result.llm_calls, result.tool_calls) == (3, 3, 3)


async def test_unlimited_turns_run_past_the_old_caps(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    script = [{"tool": "read", "arguments": {"path": f"f{i}"}} for i in range(300)]
    workspace.scripted_agent("a", [*script, {"text": "done"}], tools=ALL_TOOLS, max_turns=-1)
    result = await load().run("a", "long job")
    assert (result.status, result.turns) == ("completed", 301)


@pytest.mark.parametrize(("reply", "nudge"), [("", "was empty"), ("Working on it...", "only said")])
async def test_empty_or_progress_only_replies_are_repaired_with_tools_available(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox, reply: str, nudge: str
) -> None:
    workspace.scripted_agent(
        "a",
        [{"text": reply}, {"tool": "read", "arguments": {"path": "x"}}, {"text": "final"}],
        tools=ALL_TOOLS,
    )
    kernel = load()
    result = await kernel.run("a", "go")
    assert (result.status, result.reply, result.turns) == ("completed", "final", 3)
    assert toolbox.executions["read"] == 1  # the tools stayed available after the nudge
    history = await kernel.store().load_history("a", result.session_id)
    assert nudge in history[2].content


async def test_endless_progress_only_replies_stop_at_the_progress_threshold(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "a", [{"text": "Let me check."}], repeat=True, max_turns=-1, no_progress_limit=4
    )
    result = await load().run("a", "go")
    assert (result.status, result.incomplete_reason, result.turns) == (
        "incomplete",
        "no_progress",
        4,
    )


async def test_a_stalled_verdict_ends_the_run_as_incomplete_with_evidence(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    class CountingDetector:
        def __init__(self) -> None:
            self.seen = 0

        def observe(self, tool: str, arguments: Any, result: Any, is_error: bool) -> Verdict:
            self.seen += 1
            if self.seen >= 3:
                return Verdict("stalled", evidence={"tool": tool, "times": self.seen})
            return Verdict("repeated", warning="nothing new")

    detector = throwaway_plugin(
        "detector", soulacy_progress_detector=lambda kernel, run: CountingDetector()
    )
    workspace.scripted_agent(
        "a", [{"tool": "same", "arguments": {"n": 1}}], repeat=True, tools=ALL_TOOLS
    )
    kernel = load(detector)
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "no_progress")
    assert result.evidence == {"tool": "same", "times": 3}
    history = await kernel.store().load_history("a", result.session_id)
    assert history[2].content.endswith("[soulacy] nothing new")  # the warning reached the model


async def test_a_tool_timeout_is_a_tool_error_and_the_run_goes_on(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config("runtime:\n  timeouts: {tool: 1m}\n")
    workspace.scripted_agent("a", [{"tool": "slow"}, {"text": "moved on"}], tools=ALL_TOOLS)
    kernel = load()
    events = record(kernel)
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    (tool_result,) = [e.data for e in drain(events) if e.type == "tool.result"]
    assert tool_result["preview"] == "error: tool 'slow' timed out after 60.0s"


@pytest.mark.parametrize(
    ("config", "steps", "reason"),
    [
        ("runtime:\n  timeouts: {run: 1h}\n", [{"tool": "slow"}], "run_timeout"),
        (
            "runtime:\n  timeouts: {tool: 1m, llm: 1m, step: 90s}\n",
            [{"tool_calls": [{"tool": "slow"}, {"tool": "slow"}]}],
            "step_timeout",
        ),
        (
            "runtime:\n  timeouts: {tool: 30s, llm: 1m}\n",
            [{"text": "late", "sleep": 120}],
            "llm_timeout",
        ),
    ],
)
async def test_timeouts_end_the_run_as_incomplete(
    workspace: Workspace,
    load: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
    config: str,
    steps: list[dict[str, Any]],
    reason: str,
) -> None:
    workspace.write_config(config)
    workspace.scripted_agent(
        "a", steps, repeat=True, tools=ALL_TOOLS, max_turns=-1, no_progress_limit=0
    )
    result = await load().run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", reason)


async def test_an_unlimited_run_timeout_is_still_stopped_by_a_parent_deadline(
    workspace: Workspace, load: Callable[..., Kernel], autojump_clock: trio.abc.Clock
) -> None:
    workspace.write_config('runtime:\n  timeouts: {run: "0", http: "0"}\n')
    workspace.scripted_agent(
        "a", [{"tool": "slow"}], repeat=True, tools=ALL_TOOLS, max_turns=-1, no_progress_limit=0
    )
    kernel = load()
    events = record(kernel)
    with trio.move_on_after(3600) as parent:
        await kernel.run("a", "forever")
    assert parent.cancelled_caught
    assert trio.current_time() == pytest.approx(3600)
    (done,) = [e.data for e in drain(events) if e.type == "run.completed"]
    assert (done["status"], done["incomplete_reason"]) == ("cancelled", "cancelled by caller")


async def test_two_requests_in_one_session_run_one_after_the_other(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    soul = workspace.scripted_agent(
        "a", [{"tool": "wait"}, {"text": "first"}, {"text": "second"}], tools=ALL_TOOLS
    )
    with (soul.parent / "script.yaml").open("a", encoding="utf-8") as script:
        script.write("start: conversation\n")  # the second run answers the next step
    kernel = load()
    results: dict[str, Any] = {}

    async def ask(name: str) -> None:
        results[name] = await kernel.run("a", name, session_id="s1")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "one")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "two")
        await trio.testing.wait_all_tasks_blocked()
        assert toolbox.executions["wait"] == 1  # "two" waits for the whole exchange of "one"
        assert "two" not in results
        toolbox.release.set()
    assert (results["one"].reply, results["two"].reply) == ("first", "second")
    history = await kernel.store().load_history("a", "s1")
    assert [m.content for m in history if m.role == "user"] == ["one", "two"]


async def test_separate_conversations_run_concurrently(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent("a", [{"tool": "wait"}], repeat=True, tools=ALL_TOOLS, max_turns=2)
    kernel = load()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            kernel.run,
            "a",
            "x",
        )
        nursery.start_soon(lambda: kernel.run("a", "y", session_id="other"))
        await trio.testing.wait_all_tasks_blocked()
        assert toolbox.executions["wait"] == 2
        toolbox.release.set()


async def test_cancelling_a_session_stops_its_active_and_queued_runs_only(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a", [{"tool": "wait"}, {"text": "done"}], repeat=True, tools=ALL_TOOLS
    )
    kernel = load()
    results: dict[str, Any] = {}

    async def ask(name: str, session: str) -> None:
        results[name] = await kernel.run("a", name, session_id=session, run_id=name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "active", "s1")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "queued", "s1")
        nursery.start_soon(ask, "other", "s2")
        await trio.testing.wait_all_tasks_blocked()
        assert kernel.runner().cancel_conversation(ConversationKey("a", "s1")) == 2
        await trio.testing.wait_all_tasks_blocked()
        toolbox.release.set()
    assert results["active"].status == "cancelled"
    assert results["queued"].status == "cancelled"
    assert results["queued"].turns == 0
    assert results["other"].status == "completed"
    assert kernel.runner().statistics() == {"conversations": 0, "runs": 0}


async def test_cancel_by_run_id_and_finishing_one_run_keeps_the_others_tracking(
    workspace: Workspace, load: Callable[..., Kernel], toolbox: ToolBox
) -> None:
    workspace.scripted_agent(
        "a", [{"tool": "wait"}, {"text": "done"}], repeat=True, tools=ALL_TOOLS
    )
    kernel = load()
    results: dict[str, Any] = {}

    async def ask(name: str, session: str) -> None:
        results[name] = await kernel.run("a", name, session_id=session, run_id=name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "r1", "s1")
        nursery.start_soon(ask, "r2", "s1")
        await trio.testing.wait_all_tasks_blocked()
        toolbox.release.set()  # r1 finishes; r2 takes the turn and finishes too
    toolbox.release = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "r3", "s1")
        await trio.testing.wait_all_tasks_blocked()
        assert kernel.cancel_run("r3")
        assert not kernel.cancel_run("r1")  # finished runs are no longer tracked
    assert [results[r].status for r in ("r1", "r2", "r3")] == [
        "completed",
        "completed",
        "cancelled",
    ]


async def test_streaming_sends_text_deltas_before_the_terminal_event(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "one two three"}])
    kernel = load()
    events = record(kernel)
    await kernel.run("a", "go", stream=True)
    seen = drain(events)
    deltas = "".join(e.data["text"] for e in seen if e.type == "text.delta")
    assert deltas == "one two three"
    assert seen[-1].type == "run.completed"
    assert seen[-1].data["reply"] == "one two three"


async def test_the_terminal_event_carries_the_full_reply_metadata(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi", "usage": {"input": 7, "output": 3}}])
    kernel = load()
    events = record(kernel)
    result = await kernel.run("a", "go", session_id="s", run_id="r")
    done = drain(events)[-1]
    assert done.type == "run.completed"
    assert done.run_id == "r"
    for key in (
        "status",
        "verification",
        "incomplete_reason",
        "turns",
        "llm_calls",
        "run_id",
        "session_id",
    ):
        assert done.data[key] == result.metadata()[key]
    assert done.data["tokens"] == {"input": 7, "output": 3, "total": 10}


async def test_tools_from_a_python_file_beside_the_agent(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "a",
        [{"tool": "double", "arguments": {"n": 21}}, {"text": "42"}],
        tools=["mytools.py:double"],
    )
    (workspace.path / "agents" / "a" / "mytools.py").write_text(
        "def double(n: int) -> int:\n    '''Double n.'''\n    return 2 * n\n"
    )
    kernel = load()
    events = record(kernel)
    await kernel.run("a", "double 21")
    (result,) = [e.data for e in drain(events) if e.type == "tool.result"]
    assert (result["preview"], result["is_error"]) == ("42", False)


async def test_a_disabled_agent_does_not_run(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}], enabled=False)
    with pytest.raises(Exception, match=r"agent 'a' is disabled \(enabled: false in"):
        await load().run("a", "go")


async def test_a_strategy_that_returns_without_ending_the_run_fails_it_saying_so(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async def forgetful(run: Any) -> None:
        await run.turn()
        await run.call_model()  # and then neither run.complete nor a RunStop

    plugin = throwaway_plugin("forgetful", soulacy_run_strategy=lambda kernel, run: forgetful)
    workspace.scripted_agent("a", [{"text": "an answer nobody takes"}])
    kernel = make_kernel(extra_plugins=[plugin])
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason) == ("failed", "no_ending")
    assert "returned without ending the run" in (result.error or "")
    assert result.finished_at > 0
    stored = await kernel.store().get_run(result.run_id)
    assert stored is not None
    assert stored.status == "failed"
