"""Workflows (ordered steps or a graph), outcome assertions, and same-id recovery.

SOUL.yaml::

    workflow:
      steps:
        - {id: fetch, tool: fetch, arguments: {url: "{input}"}}
        - {id: summary, prompt: "Summarize: {steps.fetch.result}"}
    outcome:
      assertions:
        - {target: steps.fetch.result.status, op: eq, value: 200, describe: fetched}
      enforce: report      # or fail: a failed verification fails the run

A retry with the same run id restores completed steps; see docs/workflows.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal, cast

from soulacy.kernel import CliCommand, hookimpl, lazy_exports

from . import hookspecs

if TYPE_CHECKING:
    import argparse

    import pluggy

    from soulacy.kernel import AgentSpec, CliContext, ConfigIssue, ConfigSection, Kernel
    from soulacy.kernel.engine import Run, Verification
    from soulacy.kernel.store import Checkpoint, CheckpointStatus, Lease

    from ._assertions import Operator
    from ._model import Assertion, Edge, Outcome, Step, Workflow
    from ._runner import WorkflowRunner, identity_of, lease_key

# Imported on first use (PEP 562): declaring the plugin's hooks and command imports neither the
# runner nor the engine (decision 0036).
_LAZY = {
    "Assertion": "._model",
    "Edge": "._model",
    "Outcome": "._model",
    "Step": "._model",
    "Workflow": "._model",
    "WorkflowRunner": "._runner",
    "identity_of": "._runner",
    "lease_key": "._runner",
}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "Assertion",
    "Edge",
    "Outcome",
    "Step",
    "Workflow",
    "WorkflowRunner",
    "identity_of",
    "lease_key",
]


def operators(kernel: Kernel) -> dict[str, Operator]:
    """Every assertion operator: the builtin ones and those plugins contribute."""
    found = kernel.pm.unique_contributions("soulacy_assertion_operators", "assertion operator")
    return {name: cast("Operator", op) for name, (op, _) in found.items()}


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # hooks this plugin calls, for others to implement


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._model import Outcome, Workflow

    return [
        ConfigSection("workflow", Workflow | None, scope="agent", doc="steps or a graph"),
        ConfigSection("outcome", Outcome, scope="agent", doc="assertions that verify a run"),
    ]


@hookimpl
def soulacy_assertion_operators() -> Mapping[str, Operator]:
    from ._assertions import BUILTIN_OPERATORS

    return BUILTIN_OPERATORS


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    from soulacy.kernel import ConfigIssue, Location

    from ._model import check

    ops = set(operators(kernel))
    issues = check(agent.section("workflow"), agent.section("tools"), ops, str(agent.file))
    for n, assertion in enumerate(agent.section("outcome").assertions):
        if assertion.op not in ops:
            loc = agent.settings.source_of(f"outcome.assertions.{n}.op") or Location(
                str(agent.file)
            )
            message = f"unknown operator ({', '.join(sorted(ops))})"
            issues.append(
                ConfigIssue(loc, f"outcome.assertions[{n}].op", message, assertion.op, True)
            )
    reasoning = agent.settings.values.get("reasoning")  # the policy plugin's key, if loaded
    strategy = getattr(reasoning, "strategy", None)
    if agent.section("workflow") is not None and strategy:
        loc = agent.settings.source_of("reasoning.strategy") or Location(str(agent.file))
        message = "an agent runs a workflow or a reasoning strategy, not both"
        issues.append(ConfigIssue(loc, "reasoning.strategy", message, strategy, True))
    return issues


@hookimpl
def soulacy_run_strategy(kernel: Kernel, run: Run) -> Callable[[Run], Awaitable[None]] | None:
    workflow: Workflow | None = run.agent.section("workflow")
    if workflow is None or run.request.mode == "classic":
        return None
    from ._runner import WorkflowRunner

    return WorkflowRunner(workflow, operators(kernel))


@hookimpl
def soulacy_verify_outcome(kernel: Kernel, run: Run) -> Verification | None:
    outcome: Outcome = run.agent.section("outcome")
    if run.request.mode == "classic" and run.agent.section("workflow") is not None:
        return None  # a model-turn step of the workflow: the outcome is the workflow's
    if not outcome.assertions:
        return None  # nothing declared: completion stays explicitly unverified
    from soulacy.kernel.engine import Verification

    from ._assertions import evaluate

    evidence = {"input": run.request.text, "reply": run.result.reply, **run.evidence}
    ops = operators(kernel)
    results = tuple(evaluate(a, evidence, ops) for a in outcome.assertions)
    status: Literal["verified", "failed"] = (
        "verified" if all(r["passed"] for r in results) else "failed"
    )
    return Verification(status, results, outcome.enforce)


# -- soulacy runs reconcile -------------------------------------------------------------------


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "runs reconcile",
            "decide what an interrupted or legacy run's checkpoints"
            " mean, so that a retry can go on",
            "soulacy.plugins.workflows:_reconcile",
            _configure_reconcile,
        )
    ]


def _configure_reconcile(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="run id")
    parser.add_argument("--step", help="a step found in progress")
    decision = parser.add_mutually_exclusive_group(required=True)
    decision.add_argument(
        "--completed", action="store_true", help="the step's action happened: do not run it again"
    )
    decision.add_argument(
        "--failed",
        action="store_true",
        help="the step's action did not happen: run it again on retry",
    )
    decision.add_argument(
        "--accept", action="store_true", help="legacy checkpoints belong to this run: reuse them"
    )
    decision.add_argument(
        "--discard",
        action="store_true",
        help="legacy checkpoints are not to be trusted: delete them",
    )


async def _reconcile(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        message = await reconcile(
            kernel,
            args.run_id,
            args.step,
            "completed"
            if args.completed
            else "failed"
            if args.failed
            else "accept"
            if args.accept
            else "discard",
        )
    finally:
        await kernel.aclose()
    ctx.print(message)
    return 0


@hookimpl
def soulacy_reconcile_step(
    kernel: Kernel, run_id: str, step: str | None, decision: str
) -> Awaitable[str]:
    return reconcile(kernel, run_id, step, decision)


async def reconcile(kernel: Kernel, run_id: str, step: str | None, decision: str) -> str:
    """Record an operator's decision about a run's checkpoints; returns what was done.

    It is done under the run's lease (``run:RUN_ID``), so never while a process still runs
    the workflow: a live owner's lease refuses it, a gone owner's is taken over."""
    from soulacy.kernel import UsageError

    from ._runner import lease_key

    key = lease_key(run_id)
    held = await kernel.leases.acquire(key, holder="operator", wait=False)
    if held is None:
        current = await kernel.store().get_lease(key)
        where = "" if current is None else f" (pid {current.owner.pid} on {current.owner.host})"
        raise UsageError(
            f"run {run_id!r} is running{where}: reconcile it once that run has stopped (a"
            " stopped process's lease is taken over once it expires, leases.ttl)"
        )
    try:
        return await _decide(kernel, held.lease, run_id, step, decision)
    finally:
        await kernel.leases.release(held)


async def _decide(
    kernel: Kernel, fence: Lease, run_id: str, step: str | None, decision: str
) -> str:
    import time

    import attrs

    from soulacy.kernel import UsageError

    store = kernel.store()
    saved = {c.step_id: c for c in await store.load_checkpoints(run_id)}
    if not saved:
        raise UsageError(f"run {run_id!r} has no checkpoints")
    if step is not None:
        if decision not in ("completed", "failed"):
            raise UsageError("with --step, decide --completed or --failed")
        found = saved.get(step)
        if found is None:
            raise UsageError(f"run {run_id!r} has no step {step!r} (steps: {', '.join(saved)})")
        if found.status != "in_progress":
            raise UsageError(f"step {step!r} of run {run_id!r} is {found.status}, not in progress")
        evidence = {"result": None, "reconciled": decision, "at": time.time()}
        status: CheckpointStatus = "completed" if decision == "completed" else "failed"
        await store.save_checkpoint(
            attrs.evolve(found, status=status, evidence=evidence, updated_at=time.time()),
            fence=fence,
        )
        return f"step {step!r} of run {run_id!r} recorded as {decision} by the operator"
    legacy = [c for c in saved.values() if c.identity is None]
    if decision not in ("accept", "discard"):
        raise UsageError("without --step, decide --accept or --discard (legacy checkpoints)")
    if not legacy:
        raise UsageError(f"run {run_id!r} has no checkpoints without a verified identity")
    if decision == "discard":
        for checkpoint in legacy:
            await store.discard_checkpoints(run_id, checkpoint.step_id)
        return f"discarded {len(legacy)} legacy checkpoint(s) of run {run_id!r}"
    for checkpoint in legacy:
        await store.save_checkpoint(_accepted(checkpoint), fence=fence)
    return f"accepted {len(legacy)} legacy checkpoint(s) of run {run_id!r} for the next retry"


def _accepted(checkpoint: Checkpoint) -> Checkpoint:
    import time

    import attrs

    evidence = dict(checkpoint.evidence or {})
    return attrs.evolve(
        checkpoint,
        identity={"accepted": True, "by": "operator"},
        evidence=evidence,
        updated_at=time.time(),
    )
