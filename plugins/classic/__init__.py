"""The builtin run strategy: the classic tool loop, as a ``trylast`` default.

Model call, tool calls, repeat, until a reply is an answer or a limit stops the run. A reply
that is empty or only says the model is working on it is not an answer: the loop nudges the
model and asks the run's progress detector (``observe_reply``) whether the run is stalled, so
the idle stop is the progress plugin's, replaceable with it.

It answers two hooks last, as pytest registers its own behaviour: ``soulacy_run_strategy``
(any other strategy — a workflow, a reasoning strategy — answers first) and
``soulacy_tool_loop`` (what ``Run.tool_loop`` runs). Its strategy runs the loop through
``run.tool_loop("turns")``, so a plugin that answers ``soulacy_tool_loop`` first replaces the
loop of every ordinary run while this strategy stays. Block it with ``-p no:classic`` and load
another plugin that answers them; with none, a run fails with a PluginError naming the hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel import hookimpl, lazy_exports

if TYPE_CHECKING:
    from soulacy.kernel import Kernel
    from soulacy.kernel.contracts import RunStrategy, ToolLoop
    from soulacy.kernel.engine import Run

    from ._loop import NUDGE_EMPTY, NUDGE_PROGRESS, is_progress_only, tool_loop

__all__ = ["NUDGE_EMPTY", "NUDGE_PROGRESS", "is_progress_only", "tool_loop"]


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, {name: "._loop" for name in __all__})


@hookimpl(trylast=True)
def soulacy_run_strategy(kernel: Kernel, run: Run) -> RunStrategy:
    from ._loop import classic

    return classic


@hookimpl(trylast=True)
def soulacy_tool_loop(kernel: Kernel, run: Run) -> ToolLoop:
    from ._loop import tool_loop

    return tool_loop
