"""The effect ledger: a tool call that may change something is reserved in the store before it
runs, so that a call a crash cut while it ran is never run again blindly
(docs/running.md#the-effect-ledger, docs/decisions/0074-the-effect-ledger.md).

Before a call of a tool whose effects are not ``read`` executes, the run stores what it did so
far (the reply that asked for the call among it) and its *reservation*: one durable state row
of the run (``save_state(..., run_id=)``, under its fence) listing the calls under way, each
with its tool, the digest of its arguments and the attempt; the two in one commit
(``record_turn(..., state=)``) where the store writes them together. The call's receipt is its tool
record, stored with the next turn. On a same-id retry, a reserved call of the stored history
with no result was cut while it ran: ``read`` never gets here, ``idempotent`` runs again under
the same idempotency key, ``unsafe`` waits for a person's decision through the approval keeper
(approve: run it again; deny: the model is told it was not run again, its effect unknown; it
happened: not run again, the model gets the result the person gave, decision 0081).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel import Tool, redact_arguments
from soulacy.kernel.contracts import Happened
from soulacy.kernel.engine import ToolOutcome
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import StateRow, Store, ToolRecord, canonical_json

from ._endings import answers_to_unanswered_calls
from ._outcomes import capped
from ._redaction import redacted

if TYPE_CHECKING:
    from ._engine import Engine
    from ._run import EngineRun

KEY = "effects:"  # + run id: the run's reservations, one row replaced at each reservation
CUT_REASON = (
    "this call began before its run was cut (a crash, a stop or a lost lease) and had no"
    " result stored: its effect is unknown. Approve to run it again; deny to tell the model it"
    " was not run again; or, if it happened, give its result (it is not run again)"
)
NOT_RUN_AGAIN = (
    "error: not run again: this call began before the run was cut and its effect is unknown"
)


def digest(arguments: Mapping[str, Any]) -> str:
    """The arguments' identity: a reservation names them without keeping their values."""
    return hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()


def effects_of(run: EngineRun, tool: Tool | None) -> str:
    """What running the call again does: the agent's ``tool_effects`` first, then the tool's
    own declaration; an unknown tool changes nothing (it is refused before it runs)."""
    if tool is None:
        return "read"
    declared: Mapping[str, str] = run.agent.section("tool_effects") or {}
    return declared.get(tool.name, tool.effects)


async def reserve(engine: Engine, run: EngineRun, call: ToolCall) -> None:
    """Store the run so far and the call's reservation, before the call runs: one commit
    (``record_turn(..., state=)``), or the reservation alone when the run so far is stored."""
    run.under_way[call.id] = {
        "tool": call.name,
        "digest": digest(call.arguments),
        "attempt": run.result.attempt,
        # arguments the history keeps masked cannot be given to the tool again from it
        "masked": redacted(run.redactions, call.id, call.arguments) is not None,
    }
    await engine._record(run, state=StateRow(KEY + run.run_id, {"calls": run.under_way}))


async def cut_calls(run: EngineRun, store: Store) -> tuple[list[ToolCall], dict[str, Any]]:
    """The calls of the loaded history that were reserved under this run id and have no
    result (cut while they ran), with their reservations; read on a retry only."""
    unanswered = answers_to_unanswered_calls(run.messages, lambda call: "")
    if not unanswered:
        return [], {}
    state = await store.load_state(KEY + run.run_id)
    reserved: Mapping[str, Any] = (state or {}).get("calls") or {}
    ids = {answer.tool_call_id for _, answer in unanswered} & set(reserved)
    if not ids or await store.load_checkpoints(run.run_id):
        # A run with checkpoints is a workflow's: a step cut while it ran is refused until a
        # person reconciles it (docs/workflows.md#same-id-recovery), the step as a whole.
        return [], {}
    calls = [
        call
        for message in run.messages
        for call in message.tool_calls or ()
        if call.id in ids and call.id not in run.outcomes
    ]
    return calls, {call.id: reserved[call.id] for call in calls}


async def settle(engine: Engine, run: EngineRun, calls: list[ToolCall], found: Any) -> None:
    """Give each cut call a result before the run goes on: run it again where that is safe
    (or a person says so), else tell the model it was not run again, or the result a person
    gave for it (it happened)."""
    for call in calls:
        outcome = await _answer(engine, run, call, masked=bool(found[call.id].get("masked")))
        if outcome is None:
            await run.call_tool(call.name, call.arguments, call.id)
            continue
        run.outcomes[call.id] = outcome  # a later retry replays the answer: asked once
        run.pending_tools.append(
            ToolRecord(
                run.run_id,
                call.id,
                call.name,
                redact_arguments(call.arguments),
                outcome.content,
                outcome.is_error,
            )
        )
        run.messages.append(
            Message(
                "tool",
                outcome.content,
                tool_call_id=call.id,
                name=call.name,
                is_error=outcome.is_error,
            )
        )


async def _answer(
    engine: Engine, run: EngineRun, call: ToolCall, *, masked: bool
) -> ToolOutcome | None:
    """None: run the cut call again; else its answer, and it is not run again."""
    if masked:  # its arguments are kept masked: it cannot be given them again
        return ToolOutcome(NOT_RUN_AGAIN, True)
    if effects_of(run, run.tools.get(call.name)) in ("read", "idempotent"):
        return None
    answer = await engine.ask_keeper(run, _decision_call(call), [CUT_REASON])
    if answer is None:
        return None  # a person said: run it again
    if isinstance(answer, Happened):
        # It happened: the result a person gave, cut as a tool's own result would be.
        return capped(ToolOutcome(answer.result, False), run.policy)
    return ToolOutcome(NOT_RUN_AGAIN, True)


def _decision_call(call: ToolCall) -> ToolCall:
    """The decision on a cut call is asked under an id of its own: the call's own approval
    (``confirm_tools``), decided before it first ran, is another question."""
    return ToolCall(f"cut:{call.id}", call.name, call.arguments)
