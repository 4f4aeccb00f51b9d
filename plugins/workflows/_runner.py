"""Running a workflow with same-id recovery from checkpoints.

Each step is checkpointed ``in_progress`` before it runs and ``completed`` (with its evidence)
or ``failed`` after, so a retry with the same run id restores completed steps instead of
running them again. A step found ``in_progress`` is refused: its external action may already
have happened, and only an operator can say (``soulacy runs reconcile``).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import Checkpoint, CheckpointStore, ClaimOwner

from ._assertions import MISSING, Operator, evaluate, lookup
from ._model import Step, Workflow

CLAIM_POLL = 0.05  # seconds between attempts while another process holds the run
CLAIM_POLL_MAX = 1.0
HEARTBEAT = 5.0
_REF = re.compile(r"\{(input|steps(?:\.[\w-]+)+)\}")


def identity_of(run: Run, workflow: Workflow) -> dict[str, Any]:
    """What makes a retry the same request: user, session, principal, input, workflow."""
    request = run.request
    return {
        "user_id": request.user_id,
        "session_id": run.session_id,
        "principal": request.principal,
        "input_sha256": hashlib.sha256(request.text.encode()).hexdigest(),
        "workflow_version": workflow.fingerprint(),
    }


def _differences(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    return [key for key in current if saved.get(key) != current[key]]


def render(value: Any, evidence: Mapping[str, Any]) -> Any:
    """Fill ``{input}`` and ``{steps.ID.result…}``; a string that is one reference keeps the
    referenced value's type."""
    if isinstance(value, str):
        whole = _REF.fullmatch(value)
        if whole:
            found = lookup(evidence, whole.group(1))
            if found is MISSING:
                raise RunStop("failed", "step_failed", error=f"unknown reference {value}")
            return found

        def one(match: re.Match[str]) -> str:
            found = lookup(evidence, match.group(1))
            if found is MISSING:
                raise RunStop("failed", "step_failed", error=f"unknown reference {match[0]}")
            return found if isinstance(found, str) else json.dumps(found, default=str)

        return _REF.sub(one, value)
    if isinstance(value, Mapping):
        return {k: render(v, evidence) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, evidence) for v in value]
    return value


class WorkflowRunner:
    def __init__(self, workflow: Workflow, operators: Mapping[str, Operator]) -> None:
        self.workflow = workflow
        self.operators = operators

    async def __call__(self, run: Run) -> None:
        store = run.kernel.checkpoint_store()
        key, owner = f"run:{run.run_id}", run.kernel.owner
        await self._claim(run, store, key)
        failure: Exception | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeat, store, key, owner)
                try:
                    await self._run(run, store)
                except Exception as exc:  # re-raised below, not wrapped in a group
                    failure = exc
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await store.release_claim(key, owner)
        if failure is not None:
            raise failure

    async def _claim(self, run: Run, store: CheckpointStore, key: str) -> None:
        """Retries of one run serialize across processes: wait while another holds it."""
        delay = CLAIM_POLL
        while True:
            claim = await store.try_claim(key, run.kernel.owner)
            if claim.acquired:
                if claim.took_over_from is not None:
                    await run.emit(
                        "run.claim_taken_over",
                        {"key": key, "from": attrs.asdict(claim.took_over_from)},
                    )
                return
            await trio.sleep(delay)
            delay = min(delay * 2, CLAIM_POLL_MAX)

    async def _heartbeat(self, store: CheckpointStore, key: str, owner: ClaimOwner) -> None:
        while True:
            await trio.sleep(HEARTBEAT)
            await store.heartbeat(key, owner)

    async def _run(self, run: Run, store: CheckpointStore) -> None:
        identity = identity_of(run, self.workflow)
        saved = {c.step_id: c for c in await store.load_checkpoints(run.run_id)}
        self._check(run, saved, identity)
        steps: dict[str, Any] = {}
        run.evidence.update({"input": run.request.text, "steps": steps})
        reply: Any = ""
        for step_id, step in self._walk(run, steps):
            reply = await self._step(run, store, step_id, step, saved, identity, steps)
        run.evidence["reply"] = reply
        run.complete(reply if isinstance(reply, str) else json.dumps(reply, default=str))

    def _check(
        self, run: Run, saved: Mapping[str, Checkpoint], identity: Mapping[str, Any]
    ) -> None:
        for checkpoint in saved.values():
            if checkpoint.identity is None:
                raise RunStop(
                    "failed",
                    "needs_reconciliation",
                    error=(
                        f"run {run.run_id!r} has checkpoints written without a verified request"
                        " identity (by an earlier version); reconcile them before reuse:"
                        f" soulacy runs reconcile {run.run_id} --accept|--discard"
                    ),
                )
            accepted = checkpoint.identity.get("accepted")  # an operator accepted a legacy one
            differs = [] if accepted else _differences(checkpoint.identity, identity)
            if differs:
                raise RunStop(
                    "failed",
                    "identity_mismatch",
                    error=(
                        f"run {run.run_id!r} was started by a different request:"
                        f" {', '.join(differs)} differ(s); a retry must repeat the same request"
                        " (or use a new run id)"
                    ),
                    evidence={"differs": differs},
                )
            if checkpoint.status == "in_progress":
                raise RunStop(
                    "failed",
                    "needs_reconciliation",
                    error=(
                        f"step {checkpoint.step_id!r} of run {run.run_id!r} was interrupted while"
                        " in progress: its external action may already have happened. Check it,"
                        f" then record the outcome: soulacy runs reconcile {run.run_id}"
                        f" --step {checkpoint.step_id} --completed|--failed"
                    ),
                    evidence={"step": checkpoint.step_id},
                )

    def _walk(self, run: Run, steps: Mapping[str, Any]) -> Any:
        """Yield (checkpoint id, step): the list in order, or the graph along its edges."""
        if not self.workflow.is_graph:
            for step in self.workflow.steps:
                yield step.id, step
            return
        nodes = {node.id: node for node in self.workflow.nodes}
        current: str | None = self.workflow.start or self.workflow.nodes[0].id
        visits: dict[str, int] = {}
        while current is not None and current != "end":
            node = nodes[current]
            visits[current] = visits.get(current, 0) + 1
            count = visits[current]
            yield (current if count == 1 else f"{current}#{count}"), node
            current = None
            for edge in node.next:
                evidence = {"input": run.request.text, "steps": steps}
                if edge.when is None or evaluate(edge.when, evidence, self.operators)["passed"]:
                    current = edge.to
                    break

    async def _step(
        self,
        run: Run,
        store: CheckpointStore,
        step_id: str,
        step: Step,
        saved: Mapping[str, Checkpoint],
        identity: Mapping[str, Any],
        steps: dict[str, Any],
    ) -> Any:
        previous = saved.get(step_id)
        if previous is not None and previous.status == "completed":
            evidence = dict(previous.evidence or {})
            steps[step.id] = {
                "status": "completed",
                "result": evidence.get("result"),
                "restored": True,
            }
            await run.emit(
                "workflow.step", {"step": step_id, "status": "completed", "restored": True}
            )
            return evidence.get("result")
        await run.turn()  # each step is a turn: the execution policy bounds workflows too

        def checkpoint(status: Any, evidence: Mapping[str, Any] | None = None) -> Checkpoint:
            return Checkpoint(
                run.run_id, step_id, status, run.agent_id, evidence, dict(identity), time.time()
            )

        # Inputs are filled in before the step is marked in progress: a bad reference fails
        # the run without leaving a step that looks interrupted.
        filled = render(
            step.arguments if step.tool is not None else step.prompt or step.input or "",
            {"input": run.request.text, "steps": steps},
        )
        await store.save_checkpoint(checkpoint("in_progress"))
        await run.emit("workflow.step", {"step": step_id, "status": "in_progress"})
        ok, result, detail = await self._execute(run, step_id, step, filled)
        evidence = {"kind": step.kind, "result": result, **detail}
        status = "completed" if ok else "failed"
        await store.save_checkpoint(checkpoint(status, evidence))
        steps[step.id] = {"status": status, "result": result}
        await run.emit("workflow.step", {"step": step_id, "status": status})
        if not ok:
            raise RunStop(
                "failed",
                "step_failed",
                error=f"step {step_id!r} failed: {result}",
                evidence={"step": step_id, **evidence},
            )
        return result

    async def _execute(
        self, run: Run, step_id: str, step: Step, filled: Any
    ) -> tuple[bool, Any, dict[str, Any]]:
        if step.tool is not None:
            arguments = filled
            call_id = f"{run.run_id}:{step_id}"
            # The call is recorded like a model's, so the conversation stays well-formed.
            run.messages.append(
                Message("assistant", "", (ToolCall(call_id, step.tool, arguments),))
            )
            outcome = await run.call_tool(step.tool, arguments, call_id)
            value = outcome.value if outcome.value is not None else outcome.content
            return not outcome.is_error, value, {"call_id": call_id}
        text = filled
        agent_id = step.agent or run.agent_id
        sub = await run.kernel.run(
            agent_id,
            str(text),
            session_id=f"{run.session_id}:{run.run_id}:{step_id}",  # readable over HTTP too
            run_id=f"{run.run_id}:{step_id}",
            user_id=run.request.user_id,
            principal=run.request.principal,
            mode="classic" if step.prompt is not None else "auto",
        )
        detail = {
            "run_id": sub.run_id,
            "status": sub.status,
            "incomplete_reason": sub.incomplete_reason,
        }
        return sub.status == "completed", sub.reply, detail
