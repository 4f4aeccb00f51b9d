"""The approvals plugin reads an agent's ``confirm_tools`` once per agent spec, not once per
run or tool call, and a reloaded spec is read again; a run of an agent with no
``confirm_tools`` has no approvals participant at all."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from soulacy.kernel import AgentSpec, Settings, Stash
from soulacy.kernel._config import SourceMap
from soulacy.kernel.messages import ToolCall
from soulacy.plugins import approvals


class CountedValues(Mapping[str, Any]):
    """An agent's section values that count how often ``confirm_tools`` is read."""

    def __init__(self, confirm_tools: list[str]) -> None:
        self.values: dict[str, Any] = {"confirm_tools": confirm_tools}
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        self.reads += key == "confirm_tools"
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def spec(values: CountedValues) -> AgentSpec:
    return AgentSpec("a", Settings(Path("agents/a/SOUL.yaml"), values, SourceMap()))


KERNEL = SimpleNamespace(stash=Stash())  # what the hook reads of its kernel


def ask(agent: AgentSpec, tool: str, kernel: Any = KERNEL) -> str | None:
    run: Any = SimpleNamespace(agent=agent)
    found = approvals.soulacy_run_participants(kernel=kernel, run=run)
    if found is None:
        return None
    (participant,) = found
    return participant.needs_approval(run, ToolCall("c1", tool, {}))


def test_an_agent_without_confirm_tools_has_no_approvals_participant() -> None:
    run: Any = SimpleNamespace(agent=spec(CountedValues([])))
    assert approvals.soulacy_run_participants(kernel=KERNEL, run=run) is None


def test_confirm_tools_is_read_once_per_agent_spec() -> None:
    values = CountedValues(["delete"])
    agent = spec(values)
    answers = [ask(agent, tool) for tool in ("look", "delete") * 50]
    assert answers[:2] == [None, "confirm_tools lists 'delete'"]
    assert values.reads == 1


def test_a_reloaded_spec_is_read_again_and_only_the_latest_is_kept() -> None:
    kernel = SimpleNamespace(stash=Stash())
    first = spec(CountedValues(["delete"]))
    assert ask(first, "delete", kernel) is not None
    reloaded = spec(CountedValues(["look"]))  # the same agent after its SOUL.yaml changed
    assert ask(reloaded, "delete", kernel) is None  # another tool is listed now
    assert ask(reloaded, "look", kernel) == "confirm_tools lists 'look'"
    (kept,) = kernel.stash[approvals._CONFIRMED].values()
    assert kept[0] is reloaded  # one entry per agent: the cache does not grow with reloads
