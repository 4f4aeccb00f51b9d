"""When the system instructions and tool schemas alone exceed the input allowance, dropping the
task cannot help: the run fails with ContextOverflow and the measured sizes (seed: "the
provider's actual limit is surfaced")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from compaction_support import GOAL, SYSTEM, TOOLS, conversation

from soulacy.kernel import Kernel
from soulacy.kernel.contracts import ContextOverflow
from soulacy.kernel.messages import Message, ToolSpec
from soulacy.plugins.compaction import ExtractiveCompactor
from soulacy.testing import Workspace

LONG_PROMPT = Message("system", "Follow these rules. " * 400)  # 8,000 characters


def test_instructions_and_schemas_over_the_allowance_raise_with_the_measured_sizes() -> None:
    compactor = ExtractiveCompactor(window=2_500, reserve=1_000)
    with pytest.raises(ContextOverflow) as info:
        compactor.compact([LONG_PROMPT, GOAL], 1_500, TOOLS)
    exc = info.value
    instructions = 4 + 8_000 // 4
    schemas = compactor.estimate([], TOOLS)
    assert (exc.required, exc.allowance, exc.limit) == (instructions + schemas, 1_500, 2_500)
    assert str(exc).startswith(
        f"the system instructions ({instructions:,} tokens) and tool schemas ({schemas} tokens)"
        f" need {instructions + schemas:,} tokens, more than the input allowance of 1,500 tokens"
        " (context window 2,500 minus 1,000 reserved for the response); dropping the task"
        " cannot resolve this"
    )


def test_schemas_alone_can_overflow() -> None:
    tools = [ToolSpec(f"tool{i}", "d" * 400, {"type": "object"}) for i in range(20)]
    with pytest.raises(ContextOverflow) as info:
        ExtractiveCompactor().compact([GOAL], 1_000, tools)
    assert info.value.required > 1_000


def test_an_allowance_of_0_from_a_huge_output_reservation_is_a_typed_overflow() -> None:
    with pytest.raises(ContextOverflow) as info:
        ExtractiveCompactor(window=1_000, reserve=1_000).compact([SYSTEM, GOAL], 0, TOOLS)
    assert info.value.allowance == 0
    assert info.value.limit == 1_000
    assert info.value.required > 0


def test_with_no_instructions_or_schemas_the_goal_still_needs_room() -> None:
    with pytest.raises(ContextOverflow, match="shortest excerpts of the goal") as info:
        ExtractiveCompactor().compact([Message("user", "x" * 5_000)], 10)
    assert info.value.required > 10


def test_instructions_that_fit_leave_the_rest_to_compaction() -> None:
    messages = conversation(100)
    compactor = ExtractiveCompactor()
    view = compactor.compact(messages, 800, TOOLS)
    assert view[0] is SYSTEM
    assert compactor.estimate(view, TOOLS) <= 800


def scripted_provider_config(workspace: Workspace, **capacity: int) -> None:
    script = "script.yaml"
    (workspace.path / script).write_text("steps:\n  - text: never reached\n", encoding="utf-8")
    config = {"type": "scripted", **capacity, "options": {"script": script}}
    workspace.write_config({"llm": {"providers": {"x": config}}})


@pytest.mark.parametrize(
    ("capacity", "agent_llm"),
    [
        pytest.param(
            {"context_window": 1_000, "max_output_tokens": 1_000},
            {},
            id="the model's output capacity fills its window",
        ),
        pytest.param(
            {"context_window": 1_000}, {"max_tokens": 4_000}, id="the agent's llm.max_tokens"
        ),
    ],
)
async def test_a_run_whose_allowance_is_0_fails_with_context_overflow(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    capacity: dict[str, int],
    agent_llm: dict[str, Any],
) -> None:
    scripted_provider_config(workspace, **capacity)
    workspace.write_agent(
        "a", {"llm": {"provider": "x", **agent_llm}, "system_prompt": "Be careful."}
    )
    kernel = make_kernel()
    result = await kernel.run("a", "do the thing")
    assert (result.status, result.incomplete_reason) == ("failed", "context_overflow")
    assert result.llm_calls == 0
    assert "more than the input allowance of 0 tokens" in (result.error or "")
    assert "context window 1,000" in (result.error or "")


def test_an_allowance_the_window_does_not_explain_reports_no_window() -> None:
    """The engine's retry after ContextLengthExceeded uses the provider's own limit."""
    compactor = ExtractiveCompactor(window=100_000, reserve=1_000)
    with pytest.raises(ContextOverflow) as info:
        compactor.compact([LONG_PROMPT, GOAL], 1_500, TOOLS)
    assert info.value.limit is None
    assert "context window" not in str(info.value)
    assert "more than the input allowance of 1,500 tokens;" in str(info.value)
