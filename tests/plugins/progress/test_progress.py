"""Stall detection by result signatures (seed: "Progress and completion")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.contracts import Verdict
from soulacy.plugins.progress import SignatureDetector, signature
from soulacy.testing import Workspace, throwaway_plugin


def tools_plugin(answers: dict[str, Callable[[int], Any]]) -> Any:
    counters = dict.fromkeys(answers, 0)

    def make(name: str) -> Tool:
        def tool(q: int = 0) -> Any:
            counters[name] += 1
            return answers[name](counters[name])

        tool.__name__ = name
        tool.__doc__ = f"The {name} tool."
        return Tool.from_function(tool)

    return throwaway_plugin(
        "tools", soulacy_tools=lambda kernel, agent_id: [make(name) for name in answers]
    )


@pytest.fixture
def run(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> Callable[..., Any]:
    async def run(
        calls: list[tuple[str, int]], answers: dict[str, Callable[[int], Any]], **keys: Any
    ) -> Any:
        steps = [{"tool": name, "arguments": {"q": q}} for name, q in calls]
        workspace.scripted_agent(
            "a", [*steps, {"text": "done"}], tools=list(answers), max_turns=-1, **keys
        )
        kernel = make_kernel(extra_plugins=[tools_plugin(answers)], plugins=["no:sqlite_store"])
        result = await kernel.run("a", "go")
        history = await kernel.store().load_history("a", result.session_id)
        return result, history

    return run


SAME = {"read": lambda n: "the same file contents"}


async def test_twenty_identical_results_stop_the_run(run: Callable[..., Any]) -> None:
    result, _ = await run([("read", 0)] * 25, SAME)
    assert (result.status, result.incomplete_reason) == ("incomplete", "no_progress")
    assert result.tool_calls == 20
    assert result.evidence["repeated_results"] == 20
    assert result.evidence["tools"] == {"read": 20}


async def test_nineteen_identical_results_do_not(run: Callable[..., Any]) -> None:
    result, _ = await run([("read", 0)] * 19, SAME)
    assert (result.status, result.reply) == ("completed", "done")


async def test_one_fresh_result_at_nineteen_resets_the_count(run: Callable[..., Any]) -> None:
    answers = {
        "read": lambda n: "fresh!" if n == 19 else "same",
    }
    result, _ = await run([("read", 0)] * 37, answers)
    assert result.status == "completed"  # 18 same, 1 fresh, 18 same: never 20 in a row


async def test_changing_the_arguments_alone_is_not_progress(run: Callable[..., Any]) -> None:
    result, _ = await run([("read", n) for n in range(25)], SAME)
    assert (result.incomplete_reason, result.tool_calls) == ("no_progress", 20)


async def test_alternating_tools_returning_old_evidence_stop(run: Callable[..., Any]) -> None:
    answers = {"a": lambda n: "evidence A", "b": lambda n: "evidence B"}
    result, _ = await run([("a", 0), ("b", 0)] * 15, answers)
    assert result.incomplete_reason == "no_progress"
    assert result.evidence["tools"] == {"a": 10, "b": 10}


async def test_alternating_tools_with_fresh_results_go_on(run: Callable[..., Any]) -> None:
    answers = {"a": lambda n: f"A{n}", "b": lambda n: f"B{n}"}
    result, _ = await run([("a", 0), ("b", 0)] * 30, answers)
    assert result.status == "completed"


async def test_a_limit_of_zero_never_stops(run: Callable[..., Any]) -> None:
    result, _ = await run([("read", 0)] * 60, SAME, no_progress_limit=0)
    assert result.status == "completed"


async def test_the_warning_reaches_the_model_at_half_the_limit(run: Callable[..., Any]) -> None:
    result, history = await run([("read", 0)] * 12, SAME)
    tool_messages = [m.content for m in history if m.role == "tool"]
    warned = [n for n, text in enumerate(tool_messages, start=1) if "[soulacy]" in text]
    assert warned == [10]  # once, at the tenth identical result of twenty
    assert "returned nothing new" in tool_messages[9]
    assert result.status == "completed"


async def test_volatile_fields_are_ignored(run: Callable[..., Any]) -> None:
    answers = {"status": lambda n: {"state": "running", "timestamp": n, "request_id": f"r{n}"}}
    result, _ = await run([("status", 0)] * 25, answers)
    assert result.incomplete_reason == "no_progress"


def test_signatures_are_stable_and_errors_differ_from_results() -> None:
    assert signature({"b": 1, "a": 2}, False, frozenset()) == signature(
        {"a": 2, "b": 1}, False, frozenset()
    )
    assert signature("x", True, frozenset()) != signature("x", False, frozenset())
    stamped = "done at 2026-11-30T08:00:01Z in 35ms"
    assert signature(stamped, False, frozenset()) == signature(
        "done at 2026-11-30T09:12:44Z in 120ms", False, frozenset()
    )


async def test_a_tools_own_normalizer_decides_what_counts(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    counter = iter(range(1000))

    def poll() -> dict[str, Any]:
        """Polls a job: the sequence number changes every time, nothing else does."""
        return {"state": "running", "sequence": next(counter)}

    tool = attrs.evolve(Tool.from_function(poll), normalize=lambda value: {"state": value["state"]})
    plugin = throwaway_plugin("t", soulacy_tools=lambda kernel, agent_id: [tool])
    workspace.scripted_agent("a", [{"tool": "poll"}] * 30 + [{"text": "done"}], tools=["poll"])
    kernel = make_kernel(extra_plugins=[plugin], plugins=["no:sqlite_store"])
    result = await kernel.run("a", "go")
    assert (result.incomplete_reason, result.tool_calls) == ("no_progress", 20)


def test_statistics_report_the_window_and_the_streak() -> None:
    detector = SignatureDetector(limit=20, window=30)
    for _ in range(5):
        detector.observe("t", {}, "same", False)
    stats = detector.statistics()
    assert (stats["window"], stats["streak"], stats["last_verdict"]) == (30, 5, "repeated")


async def test_a_trivial_detector_plugin_replaces_the_builtin(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    class StopAtThree:
        seen = 0

        def observe(self, tool: str, arguments: Any, result: Any, is_error: bool) -> Verdict:
            self.seen += 1
            return Verdict("stalled" if self.seen == 3 else "progress", evidence={"n": 3})

    plugin = throwaway_plugin("mine", soulacy_progress_detector=lambda run: StopAtThree())
    workspace.scripted_agent(
        "a", [{"tool": "read", "arguments": {"q": n}} for n in range(9)], tools=["read"]
    )
    answers = {"read": lambda n: f"fresh {n}"}
    kernel = make_kernel(
        extra_plugins=[tools_plugin(answers), plugin], plugins=["no:progress", "no:sqlite_store"]
    )
    result = await kernel.run("a", "go")
    assert (result.incomplete_reason, result.tool_calls, result.evidence) == (
        "no_progress",
        3,
        {"n": 3},
    )
