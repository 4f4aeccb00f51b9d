"""Per-run participants (decision 0061): asked once per run through pluggy, then called as
plain methods each turn — before and after a model call, before a tool call, whether it needs
approval, after it, and at the run's end. The per-turn hooks they replace still work, through
one adapter, and warn that they are deprecated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.contracts import RunParticipant
from soulacy.kernel.engine import Run, ToolOutcome
from soulacy.kernel.messages import ModelReply, ModelRequest, ToolCall
from soulacy.testing import Workspace, throwaway_plugin

MEMORY = "no:sqlite_store"
STEPS: list[dict[str, Any]] = [
    {"tool": "read", "arguments": {"path": "x"}, "id": "c1"},
    {"tool": "read", "arguments": {"path": "y"}, "id": "c2"},
    {"text": "done"},
]


def read_tool() -> Any:
    def read(path: str) -> str:
        """Read a file."""
        return f"contents of {path}"

    return throwaway_plugin("reader", soulacy_tools=lambda: [Tool.from_function(read)])


class Journal(RunParticipant):
    """Writes down every call it gets, in order, with what it was given."""

    def __init__(self, name: str, log: list[str], refuse_tool: str | None = None) -> None:
        self.name, self.log, self.refuse_tool = name, log, refuse_tool

    def before_model_call(self, run: Run, request: ModelRequest) -> str | None:
        self.log.append(f"{self.name}:before_model:{len(request.messages)}")
        return None

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        self.log.append(f"{self.name}:after_model:{provider}")

    def before_tool_call(self, run: Run, call: ToolCall) -> str | None:
        self.log.append(f"{self.name}:before_tool:{call.id}")
        return f"{call.name} is off limits" if call.id == self.refuse_tool else None

    def after_tool_call(self, run: Run, call: ToolCall, outcome: ToolOutcome) -> None:
        self.log.append(f"{self.name}:after_tool:{call.id}:{outcome.is_error}")

    async def run_ended(self, run: Run) -> None:
        self.log.append(f"{self.name}:ended:{run.result.status}")


def joining(*participants: object, asked: list[str] | None = None) -> Any:
    def soulacy_run_participants(run: Run) -> list[object]:
        if asked is not None:
            asked.append(run.run_id)
        return list(participants)

    return throwaway_plugin("journal", soulacy_run_participants=soulacy_run_participants)


async def test_participants_are_asked_once_per_run_and_called_in_turn_order(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", STEPS, tools=["read"])
    log: list[str] = []
    asked: list[str] = []
    plugin = joining(Journal("j", log), asked=asked)
    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), plugin])
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert asked == [result.run_id]  # once per run, not per turn
    assert log == [
        "j:before_model:1",
        "j:after_model:scripted",
        "j:before_tool:c1",
        "j:after_tool:c1:False",
        "j:before_model:3",
        "j:after_model:scripted",
        "j:before_tool:c2",
        "j:after_tool:c2:False",
        "j:before_model:5",
        "j:after_model:scripted",
        "j:ended:completed",
    ]


async def test_a_refusal_before_a_model_call_ends_the_run_incomplete_with_its_reason(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", STEPS, tools=["read"])

    class Budget(RunParticipant):
        async def before_model_call(self, run: Run, request: ModelRequest) -> str | None:
            return "over_budget" if run.result.llm_calls >= 1 else None

    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), joining(Budget())])
    result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "over_budget")
    assert result.llm_calls == 1  # the second call was never made


async def test_a_refused_tool_call_is_an_error_result_and_any_refusal_wins(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", STEPS, tools=["read"])
    log: list[str] = []
    plugin = joining(Journal("allows", log), Journal("refuses", log, refuse_tool="c1"))
    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), plugin])
    result = await kernel.run("a", "go", session_id="s")
    assert result.status == "completed"
    history = await kernel.store().load_history("a", "s")
    answers = {m.tool_call_id: (m.content, m.is_error) for m in history if m.role == "tool"}
    assert answers["c1"] == ("error: read is off limits", True)
    assert answers["c2"] == ("contents of y", False)
    assert {"allows:before_tool:c1", "refuses:before_tool:c1"} <= set(log)
    assert "allows:after_tool:c1:True" in log  # told of the refusal, as of any outcome


async def test_a_run_nobody_takes_part_in_calls_no_method(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """The no-ops of RunParticipant are not called: an object that overrides nothing costs a
    turn nothing, and one that overrides one method is called for that one only."""
    workspace.scripted_agent("a", STEPS, tools=["read"])
    ended: list[str] = []

    class Idle(RunParticipant):
        def __getattribute__(self, name: str) -> Any:
            if name in ("before_model_call", "after_model_call", "before_tool_call"):
                raise AssertionError(f"{name} is RunParticipant's no-op: never called")
            return super().__getattribute__(name)

    class EndOnly:  # any object: no base class needed
        def run_ended(self, run: Run) -> None:
            ended.append(run.result.status)

    plugin = joining(Idle(), EndOnly())
    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), plugin])
    assert (await kernel.run("a", "go")).status == "completed"
    assert ended == ["completed"]


async def test_a_failing_run_ended_is_logged_and_changes_nothing(
    workspace: Workspace, make_kernel: Callable[..., Kernel], caplog: pytest.LogCaptureFixture
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])

    class Broken(RunParticipant):
        def run_ended(self, run: Run) -> None:
            raise RuntimeError("boom")

    kernel = make_kernel(plugins=[MEMORY], extra_plugins=[joining(Broken())])
    result = await kernel.run("a", "go")
    assert (result.status, result.reply) == ("completed", "hi")
    assert "run_ended failed" in caplog.text
    assert "boom" in caplog.text


async def test_the_deprecated_per_turn_hooks_still_take_part_and_warn(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", STEPS, tools=["read"])
    seen: list[str] = []

    def soulacy_tool_permission(tool_name: str) -> bool:
        seen.append(f"permission:{tool_name}")
        return False

    def soulacy_usage(provider: str) -> None:
        seen.append(f"usage:{provider}")

    plugin = throwaway_plugin(
        "old", soulacy_tool_permission=soulacy_tool_permission, soulacy_usage=soulacy_usage
    )
    with pytest.warns(DeprecationWarning, match="soulacy_run_participants"):
        kernel = make_kernel(plugins=[MEMORY], extra_plugins=[read_tool(), plugin])
    result = await kernel.run("a", "go", session_id="s")
    assert result.status == "completed"
    history = await kernel.store().load_history("a", "s")
    refused = [m.content for m in history if m.role == "tool"]
    assert refused == ["error: permission denied for tool 'read'"] * 2
    assert seen.count("usage:scripted") == 3
    assert seen.count("permission:read") == 2
