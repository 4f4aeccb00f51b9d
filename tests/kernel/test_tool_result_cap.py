"""A stored tool result has a bound (issue 42, "bounded growth"): beyond
``runtime.max_tool_result_chars`` (100,000 by default; 0: no cap) the model and the store get
the same excerpt, its start and end with a line saying how much was left out."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from soulacy.kernel import Kernel, Tool
from soulacy.testing import Workspace, throwaway_plugin

BIG = "a" * 200_000 + "z" * 100_000  # 300,000 characters: start and end tell apart


def big_tool() -> object:
    def dump() -> str:
        """Returns a very long text."""
        return BIG

    return throwaway_plugin("dump", soulacy_tools=lambda: [Tool.from_function(dump)])


@pytest.mark.parametrize(
    ("config", "kept"), [("", 100_000), ("runtime: {max_tool_result_chars: 0}\n", None)]
)
async def test_a_long_tool_result_is_kept_and_sent_as_one_excerpt(
    workspace: Workspace, make_kernel: Callable[..., Kernel], config: str, kept: int | None
) -> None:
    workspace.write_config(config)
    workspace.scripted_agent("a", [{"tool": "dump", "id": "c1"}, {"text": "ok"}], tools=["dump"])
    kernel = make_kernel(extra_plugins=[big_tool()])
    result = await kernel.run("a", "go", session_id="s")
    assert result.status == "completed"
    history = await kernel.store().load_history("a", "s")
    (stored,) = [m.content for m in history if m.role == "tool"]
    policy = kernel.resolve_policy("a")
    assert policy.limit("max_tool_result_chars").value == kept
    if kept is None:
        assert stored == BIG
    else:
        head, marker, tail = stored.split("\n")
        assert (len(head), len(tail)) == (kept * 2 // 3, kept // 3)
        assert head == BIG[: len(head)]
        assert tail == BIG[-len(tail) :]
        assert marker == (
            f"[soulacy] {len(BIG) - kept + (kept - len(head) - len(tail))} of 300000 characters"
            " of this tool result are left out (runtime.max_tool_result_chars)"
        )
        records = await kernel.store().load_tool_records(result.run_id)
        assert records["c1"].content == stored  # replayed as the model saw it
    await kernel.aclose()
