"""A finished run is freed when it returns, not by the garbage collector.

The run's plugins make helpers that refer back to it (the compactor reads ``run.first_new``; a
participant's methods are bound to objects made for the run) and the run keeps them: a
reference cycle, which would leave every finished run to the collector, aging into its oldest
generation meanwhile (W3 of bench/run_peers.py: about 60 objects a run, and a full collection
more). The engine lets go of them once the run is over.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

from soulacy.kernel import Kernel
from soulacy.testing import Workspace, participant_plugin

TOOL_THEN_ANSWER = [{"tool": "echo", "arguments": {"text": "hi"}, "id": "c1"}, {"text": "done"}]


async def test_a_finished_run_is_freed_without_the_collector(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", TOOL_THEN_ANSWER, tools=["tools.py:echo"], repeat=True)
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        'def echo(text: str) -> str:\n    """Says it again."""\n    return text\n'
    )
    runs: list[weakref.ref[Any]] = []

    def seen(run: Any, reply: Any, provider: str, model: str | None) -> None:
        if not runs:
            runs.append(weakref.ref(run))

    # The default plugins (compaction, progress, costs ...) take part, the memory store keeps
    # the history.
    kernel = make_kernel(
        plugins=["no:sqlite_store"], extra_plugins=[participant_plugin(after_model_call=seen)]
    )
    await kernel.run("a", "warm up", session_id="warm-up")  # imports and first-call caches
    runs.clear()
    gc.collect()
    gc.disable()
    try:
        result = await kernel.run("a", "go", session_id="s")
        assert result.status == "completed", result.metadata()
        assert runs, "the participant saw no model call"
        assert runs[0]() is None, "the finished run is kept by a reference cycle"
    finally:
        gc.enable()
    await kernel.aclose()
