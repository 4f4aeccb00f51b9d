"""Running a workflow with same-id recovery from checkpoints.

Each step is checkpointed ``in_progress`` before it runs and ``completed`` (with its evidence)
or ``failed`` after, so a retry with the same run id restores completed steps instead of
running them again. A step found ``in_progress`` is refused: its external action may already
have happened, and only an operator can say (``soulacy runs reconcile``).

A run holds the lease ``run:RUN_ID`` (its holder is the run id) while it runs, taken without
waiting and renewed by the kernel (``leases:`` in config.yaml); every checkpoint is written
fenced by it. A lease whose owner is gone (its process exited, or it stopped renewing past
``leases.ttl``, on any host) is taken over, which is emitted as ``run.claim_taken_over``; the
stale owner's next checkpoint write is refused (:class:`~soulacy.kernel.store.LeaseLost`) and
its body is cancelled as soon as a renewal finds the lease lost: it ends ``failed
(lease_lost)``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import trio

from soulacy.kernel.engine import Run, RunStop
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import Checkpoint, Lease, StorageError, Store

from ._assertions import MISSING, Operator, evaluate, lookup
from ._model import Step, Workflow

_REF = re.compile(r"\{(input|steps(?:\.[\w-]+)+)\}")


class Held(Protocol):
    """What the runner needs of the kernel's held lease: the current lease, the fence."""

    lease: Lease


def lease_key(run_id: str) -> str:
    """The lease a workflow run holds while it runs (``run:RUN_ID``, held by the run id)."""
    return f"run:{run_id}"


async def _busy(run: Run, store: Store, key: str) -> RunStop:
    """The refusal of a run whose lease a live owner holds: another process is executing
    this run id (the engine already serializes the turns of one conversation, so this is
    another request under the same run id, or an owner that has not yet seen it lost the
    lease). It is not waited for: its lease expires within ``leases.ttl`` if it is gone."""
    try:
        current = await store.get_lease(key)
    except StorageError:
        current = None
    holder = "another process"
    if current is not None:
        holder = f"pid {current.owner.pid} on {current.owner.host} (token {current.token})"
    return RunStop(
        "failed",
        "run_in_progress",
        error=(
            f"run {run.run_id!r} is being executed by {holder}: retry once it has finished"
            f" (or after its lease expires, if that process is gone)"
        ),
        evidence={"lease": None if current is None else current.describe()},
    )


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
        """Run the workflow under the lease ``run:RUN_ID`` (held by the run id, renewed by the
        kernel): every checkpoint is written under it, so a stale owner's write is refused
        with :class:`LeaseLost` and the run ends ``failed (lease_lost)``."""
        kernel, key = run.kernel, lease_key(run.run_id)
        store = kernel.store()
        with trio.CancelScope() as scope:  # cancelled if a renewal finds the lease taken over
            held = await kernel.leases.acquire(
                key, holder=run.run_id, wait=False, on_lost=scope.cancel
            )
            if held is None:
                raise await _busy(run, store, key)
            try:
                previous = held.took_over_from
                if previous is not None:
                    await run.emit(
                        "run.claim_taken_over",
                        {
                            "key": key,
                            "from": attrs.asdict(previous.owner),
                            "lease": previous.describe(),
                            "expired": previous.expired,
                        },
                    )
                await self._run(run, store, held)
            finally:
                await kernel.leases.release(held)  # shielded; never raises
        if scope.cancelled_caught:  # only a lost lease cancels it: the engine says lease_lost
            assert held is not None
            raise held.error()

    async def _run(self, run: Run, store: Store, held: Held) -> None:
        identity = identity_of(run, self.workflow)
        saved = {c.step_id: c for c in await store.load_checkpoints(run.run_id)}
        self._check(run, saved, identity)
        steps: dict[str, Any] = {}
        run.evidence.update({"input": run.request.text, "steps": steps})
        reply: Any = ""
        for step_id, step in self._walk(run, steps):
            reply = await self._step(run, store, held, step_id, step, saved, identity, steps)
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
        store: Store,
        held: Held,
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
        # Under the lease: a stale owner's write is refused (LeaseLost), never interleaved.
        await store.save_checkpoint(checkpoint("in_progress"), fence=held.lease)
        await run.emit("workflow.step", {"step": step_id, "status": "in_progress"})
        ok, result, detail = await self._execute(run, step_id, step, filled)
        evidence = {"kind": step.kind, "result": result, **detail}
        status = "completed" if ok else "failed"
        await store.save_checkpoint(checkpoint(status, evidence), fence=held.lease)
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
