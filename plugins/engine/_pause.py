"""``on_limit: pause``: a run that reaches a count limit (turns, steps, model calls, tokens)
asks a person whether to go on, instead of ending ``incomplete`` (docs/running.md#on_limit-pause).

The question goes through the approval keeper, as a call's approval does, under the call id
``limit:<name>:<value>``: approve and the limit doubles (at most its ceiling) and the run goes
on where it was; deny (or no keeper, or no room under a ceiling) and it ends as it would have.
Deadlines (``run_timeout``) and stalls (``no_progress``) are not paused: time and a loop that
repeats itself are not resources a person can add to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel.engine import RunStop
from soulacy.kernel.messages import ToolCall
from soulacy.kernel.policy import Limit

if TYPE_CHECKING:
    from ._engine import Engine
    from ._run import EngineRun

# The stop reason of each limit that a person may raise, and the policy's name for it.
PAUSABLE = {
    "max_turns": "max_turns",
    "max_steps": "reasoning_max_steps",
    "max_llm_calls": "max_llm_calls",
    "max_tokens": "max_tokens",
}
DECIDED = "a person's decision (on_limit: pause)"


def pauses(run: EngineRun) -> bool:
    """The agent's ``on_limit``, else the workspace's; ``end`` unless either says ``pause``."""
    chosen: str = run.agent.section("on_limit") or run.kernel.config.section("on_limit")
    return chosen == "pause"


async def go_on(engine: Engine, run: EngineRun, stop: RunStop) -> bool:
    """Whether the run goes on past ``stop`` (a person raised its limit), asked once per
    limit reached; False: it ends as ``stop`` says."""
    name = PAUSABLE.get(stop.reason or "")
    if name is None or stop.status != "incomplete" or not pauses(run):
        return False
    limit: Limit[int] = run.policy.limit(name)
    if limit.value is None or limit.value <= 0:
        return False
    raised = limit.value * 2
    asked = ToolCall(
        f"limit:{stop.reason}:{limit.value}",
        "continue",
        {"limit": stop.reason, "reached": limit.value, "raised_to": raised},
    )
    why = (
        f"the run reached {stop.reason} ({limit.value}, {limit.source}): approve to go on with"
        f" {raised}, deny to end it incomplete"
    )
    if await engine.ask_keeper(run, asked, [why]) is not None:
        return False
    run.policy = run.policy.with_limits(**{name: Limit(raised, DECIDED, reason=why)})
    if run.kernel.events.wants("run.limits"):
        await run.kernel.events.emit("run.limits", run.policy.to_dict(), run_id=run.run_id)
    return True
