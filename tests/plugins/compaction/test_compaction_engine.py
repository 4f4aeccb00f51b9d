"""Compaction inside real runs: the engine gives the builtin compactor the input allowance, the
model receives the compacted view, and the stored history stays complete. Another compactor
can take over."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from compaction_support import history, lines, markers, model_plugin, text_reply, tool_reply

from soulacy.kernel import Kernel, Tool, hookimpl
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolSpec, Usage
from soulacy.plugins.compaction import ExtractiveCompactor
from soulacy.testing import Workspace

RESULT_CHARS = 20_000


def read(path: str) -> str:
    """Read a file (20,000 characters of numbered lines)."""
    return lines(path, RESULT_CHARS)


class Recorder:
    """The model: calls ``read`` ``turns`` times per run, then answers; keeps a copy of every
    request it receives."""

    def __init__(self, turns: int = 5, input_tokens: Callable[[ModelRequest], int] | None = None):
        self.turns = turns
        self.requests: list[list[Message]] = []
        self.tools: list[Sequence[ToolSpec]] = []
        self.input_tokens = input_tokens
        self.turn = 0  # of the current run

    def next_run(self) -> None:
        self.requests, self.tools, self.turn = [], [], 0

    def __call__(self, request: ModelRequest, index: int) -> ModelReply:
        self.requests.append(list(request.messages))  # the engine appends to its list later
        self.tools.append(request.tools)
        turn, self.turn = self.turn, self.turn + 1
        reply = tool_reply(index, path=f"file{turn}") if turn < self.turns else text_reply("done")
        if self.input_tokens is not None:
            reply = ModelReply(reply.message, Usage(self.input_tokens(request), 1), "stop")
        return reply


class Capture:
    """Keeps the compactor the other plugins made for each run."""

    name = "capture-compactor"

    def __init__(self) -> None:
        self.made: list[Any] = []

    @hookimpl(wrapper=True)
    def soulacy_compactor(self, kernel: Kernel, run: Any) -> Any:
        compactor = yield
        self.made.append(compactor)
        return compactor


def load(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    model: Recorder,
    *plugins: Any,
    context_window: int | None = 3_000,
    max_output_tokens: int | None = 1_000,
    agent: dict[str, Any] | None = None,
    **options: Any,
) -> Kernel:
    workspace.write_agent(
        "a",
        {
            "llm": {"provider": "fn"},
            "tools": ["read"],
            "system_prompt": "You are a careful agent.",
            **(agent or {}),
        },
    )
    provider = model_plugin(
        model,
        context_window=context_window,
        max_output_tokens=max_output_tokens,
        tools=[Tool.from_function(read)],
    )
    return make_kernel(extra_plugins=[provider, *plugins], **options)


async def test_the_model_receives_the_compacted_view_while_the_stored_history_is_complete(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    model, capture = Recorder(), Capture()
    kernel = load(workspace, make_kernel, model, capture)
    result = await kernel.run("a", "GOAL: read five files", session_id="s")
    assert (result.status, result.reply, result.tool_calls) == ("completed", "done", 5)
    (compactor,) = capture.made
    assert isinstance(compactor, ExtractiveCompactor)
    for request, tools in zip(model.requests, model.tools, strict=True):
        assert request[0] == Message("system", "You are a careful agent.")
        assert request[1] == Message("user", "GOAL: read five files")
        assert compactor.estimate(request, tools) <= 2_000  # window 3,000 minus 1,000
        for message in request:
            assert len(message.content) < RESULT_CHARS
    # A 20,000-character result (5,000 tokens) never reaches the model whole, but flagged.
    cut = [m for request in model.requests for m in request if m.meta.get("truncated")]
    assert cut
    assert all(m.meta["original_chars"] == RESULT_CHARS for m in cut)
    assert markers(model.requests[-1])  # older exchanges stand behind a marker
    stored = await history(kernel, "a", "s")
    assert [m.role for m in stored] == ["user"] + ["assistant", "tool"] * 5 + ["assistant"]
    results = [m for m in stored if m.role == "tool"]
    assert [m.content for m in results] == [read(f"file{i}") for i in range(5)]
    assert not any(m.meta.get("truncated") or "compaction" in m.meta for m in stored)


async def test_the_goal_is_the_runs_own_request_in_a_long_session(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    model = Recorder(turns=3)
    kernel = load(workspace, make_kernel, model)
    await kernel.run("a", "FIRST: read three files", session_id="s")
    model.next_run()
    await kernel.run("a", "SECOND: read three more", session_id="s")
    for request in model.requests:
        assert request[0].role == "system"
        assert sum(m.content == "SECOND: read three more" for m in request) == 1
    last = model.requests[-1]
    goal = next(i for i, m in enumerate(last) if m.content == "SECOND: read three more")
    # The first run (its request, 3 exchanges, its answer) stands behind the first marker.
    earlier = markers(last)[0]
    assert last.index(earlier) == goal - 1
    assert earlier.meta["compaction"]["roles"] == {"user": 1, "assistant": 4, "tool": 3}


@pytest.mark.parametrize(
    ("capacity", "agent", "expected"),
    [
        pytest.param({"context_window": 5_000, "max_output_tokens": 1_000}, {}, 4_000, id="window"),
        pytest.param(
            {"context_window": 1_000, "max_output_tokens": None},
            {"llm": {"provider": "fn", "max_tokens": 4_000}},
            0,
            id="never negative",
        ),
        pytest.param(
            {"context_window": None, "max_output_tokens": None}, {}, None, id="unknown window"
        ),
    ],
)
async def test_the_allowance_is_the_window_minus_the_output_reservation(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    capacity: dict[str, int | None],
    agent: dict[str, Any],
    expected: int | None,
) -> None:
    seen: list[int | None] = []

    class Recording:
        def compact(
            self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec]
        ) -> Sequence[Message]:
            seen.append(allowance)
            return messages

    replacement = Replacement(Recording())
    kernel = load(workspace, make_kernel, Recorder(turns=1), replacement, agent=agent, **capacity)
    await kernel.run("a", "go")
    assert seen == [expected, expected]


class Replacement:
    """A compactor plugin that takes over from the builtin one (``tryfirst``)."""

    name = "replacement-compactor"

    def __init__(self, compactor: Any) -> None:
        self.compactor = compactor

    @hookimpl(tryfirst=True)
    def soulacy_compactor(self, kernel: Kernel, run: Any) -> Any:
        return self.compactor


class KeepLastTwo:
    """A toy replacement: the system prompt and the last two messages."""

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]:
        return [messages[0], *messages[-2:]]


async def test_a_replacement_compactor_takes_over_with_tryfirst(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    model = Recorder(turns=3)
    kernel = load(workspace, make_kernel, model, Replacement(KeepLastTwo()))
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert [len(r) for r in model.requests] == [3, 3, 3, 3]
    assert [m.role for m in model.requests[-1]] == ["system", "assistant", "tool"]


async def test_with_the_builtin_disabled_the_engine_passes_messages_through(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    model = Recorder(turns=3)
    kernel = load(workspace, make_kernel, model, plugins=["no:compaction"])
    assert not kernel.pm.has_plugin("compaction")
    result = await kernel.run("a", "go")
    assert result.status == "completed"
    assert [len(r) for r in model.requests] == [2, 4, 6, 8]
    assert all(len(m.content) == RESULT_CHARS for m in model.requests[-1] if m.role == "tool")


async def test_the_engine_calibrates_the_estimate_with_reported_usage(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    capture = Capture()
    estimates: list[int] = []

    def twice_the_estimate(request: ModelRequest) -> int:
        estimate = ExtractiveCompactor().estimate(request.messages, request.tools)  # raw
        estimates.append(estimate)
        return 2 * estimate

    model = Recorder(turns=1, input_tokens=twice_the_estimate)
    kernel = load(workspace, make_kernel, model, capture, context_window=None)
    await kernel.run("a", "go")
    (compactor,) = capture.made
    # Two observations of a ratio of 2: 1 -> 1.3 -> 1.51 (smoothing 0.3).
    assert len(estimates) == 2
    assert compactor.calibration.ratio == pytest.approx(1.51)


async def test_each_compacted_call_is_announced_by_an_event_before_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    import math

    model, capture = Recorder(), Capture()
    kernel = load(workspace, make_kernel, model, capture)
    events = kernel.events.subscribe(math.inf)
    result = await kernel.run("a", "GOAL: read five files", session_id="s")
    seen = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:  # every event of the run is read
            break
    kinds = [e.type for e in seen]
    compacted = [e for e in seen if e.type == "context.compacted"]
    # the view of a call is compacted once the history is over the allowance (2,000 tokens)
    shortened = [
        n
        for n, request in enumerate(model.requests)
        if markers(request) or any(m.meta.get("truncated") for m in request)
    ]
    assert len(compacted) == len(shortened) >= 1
    for event in compacted:
        assert event.run_id == result.run_id
        assert kinds[seen.index(event) + 1] == "llm.call"  # announced before the call it shapes
        data = event.data
        assert data["allowance"] == 2_000
        assert data["tokens_after"] <= data["allowance"] < data["tokens_before"]
        assert data["messages_after"] <= data["messages_before"]
        assert set(data) == {
            "turn",
            "messages_before",
            "messages_after",
            "tokens_before",
            "tokens_after",
            "allowance",
        }
    assert [e.data["turn"] for e in compacted] == sorted({e.data["turn"] for e in compacted})


async def test_a_view_sent_as_it_is_announces_nothing(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    import math

    model = Recorder(turns=2)
    kernel = load(workspace, make_kernel, model, context_window=None, max_output_tokens=None)
    events = kernel.events.subscribe(math.inf)
    await kernel.run("a", "GOAL: read two files", session_id="s")
    kinds = []
    while True:
        try:
            kinds.append(events.receive_nowait().type)
        except trio.WouldBlock:
            break
    assert "llm.call" in kinds
    assert "context.compacted" not in kinds
