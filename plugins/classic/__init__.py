"""The builtin run strategy: the classic tool loop, as a ``trylast`` default.

Model call, tool calls, repeat, until a reply is an answer or a limit stops the run. A reply
that is empty or only says the model is working on it is not an answer: the loop nudges the
model and asks the run's progress detector (``observe_reply``) whether the run is stalled, so
the idle stop is the progress plugin's, replaceable with it.

It answers two hooks last, as pytest registers its own behaviour: ``soulacy_run_strategy``
(any other strategy — a workflow, a reasoning strategy — answers first) and
``soulacy_tool_loop`` (what ``Run.tool_loop`` runs). Block it with ``-p no:classic`` and load
another plugin that answers them; with none, a run fails with a PluginError naming the hook.
"""

from __future__ import annotations

import math
import re
from typing import Literal

import trio

from soulacy.kernel import Kernel, hookimpl
from soulacy.kernel.contracts import RunStrategy, ToolLoop
from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message

__all__ = ["NUDGE_EMPTY", "NUDGE_PROGRESS", "is_progress_only", "tool_loop"]

NUDGE_EMPTY = (
    "[soulacy] Your last reply was empty. Continue the task: call a tool, or give your final"
    " answer."
)
NUDGE_PROGRESS = (
    "[soulacy] Your last reply only said that you are working on it. Continue the task now:"
    " call a tool, or give your final answer."
)
# A reply that only announces work ("Let me check that.", "Working on it...") is not an answer.
_PROGRESS_ONLY = re.compile(
    r"^(ok(ay)?[,.!]?\s*|sure[,.!]?\s*)?("
    r"(i'?m|i am) (still )?(working on it|on it|looking into it|checking)"
    r"|working on it|one moment|just a moment|stand by|please wait"
    r"|let me (check|look|see|think|try|continue|start|work)[^.!?]*"
    r"|i('ll| will) (now )?(check|look|start|continue|proceed|work|get started)[^.!?]*"
    r")[.!…]*(\.\.\.)?$",
    re.IGNORECASE,
)


def is_progress_only(text: str) -> bool:
    """True for a short reply that only says the model is working on it."""
    stripped = text.strip()
    return len(stripped) <= 160 and bool(_PROGRESS_ONLY.match(stripped))


async def tool_loop(run: Run, limit: Literal["turns", "steps"] = "turns") -> None:
    """The tool loop. ``limit="steps"`` counts reasoning steps (``reasoning.max_steps``,
    capped by the turn ceiling) and times each with the reasoning step timeout."""
    policy = run.policy
    timeout = (policy.step_timeout if limit == "turns" else policy.reasoning_step_timeout).value
    seconds = math.inf if timeout is None else float(timeout)
    # Looked up once per run, not per reply: an older detector may lack the method.
    observe_reply = getattr(run.detector, "observe_reply", None)
    while True:
        await run.turn(limit)
        with trio.move_on_after(seconds) as step_scope:
            run.step_scope = step_scope  # a wait for approval in this step does not use it up
            message = (await run.call_model()).message
            if message.tool_calls:
                for call in message.tool_calls:
                    await run.call_tool(call.name, call.arguments, call.id)
                continue
            text = message.content.strip()
            if text and not is_progress_only(text):
                run.complete(message.content)
                return
            # Repair: nudge the model, keep the tools available; the turn counts.
            if observe_reply is not None:
                verdict = observe_reply(message.content)
                if verdict.kind == "stalled":
                    raise RunStop("incomplete", "no_progress", evidence=verdict.evidence)
            run.messages.append(Message("user", NUDGE_PROGRESS if text else NUDGE_EMPTY))
        if step_scope.cancelled_caught:
            raise RunStop("incomplete", "step_timeout")


async def _classic(run: Run) -> None:
    await tool_loop(run, "turns")


@hookimpl(trylast=True)
def soulacy_run_strategy(kernel: Kernel, run: Run) -> RunStrategy:
    return _classic


@hookimpl(trylast=True)
def soulacy_tool_loop(kernel: Kernel, run: Run) -> ToolLoop:
    return tool_loop
