"""The classic tool loop itself (imported when a run asks for it, not when the plugin loads)."""

from __future__ import annotations

import re
from typing import Literal

from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message

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
    seconds = None if timeout is None else float(timeout)
    # Looked up once per run, not per reply: an older detector may lack the method.
    observe_reply = getattr(run.detector, "observe_reply", None)
    # One cancel scope for the whole loop, not one per step: a step or model call that outlasts
    # its deadline comes out of here as RunStop (step_timeout, llm_timeout), and the step in
    # progress ends with the loop.
    with run.timeouts(ends_step=True):
        while True:
            await run.turn(limit)  # which ends the step before it
            # Timed by the run's clock (a wait for approval does not count).
            run.start_step(seconds)
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


async def classic(run: Run) -> None:
    """The default run strategy: the tool loop from the start, each model call a turn. It asks
    for the loop through ``run.tool_loop`` (the ``soulacy_tool_loop`` hook, this module's
    :func:`tool_loop` by default), so a plugin that answers that hook first replaces the loop of
    every ordinary run, not only of the strategies that call it."""
    await run.tool_loop("turns")
