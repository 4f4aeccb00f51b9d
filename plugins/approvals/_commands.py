"""``soulacy runs approve|deny|happened RUN CALL`` and ``soulacy runs approvals``: the
operator's side.

The command line is the operator's: it sees every principal's requests. A decision of a run
whose process is gone (the run reads ``interrupted``) resumes the run in this command, to its
end, as a same-id retry (what was recorded replays; the decided call runs or is refused).
"""

from __future__ import annotations

import argparse
import getpass
import time

from soulacy.kernel import CliContext, UsageError
from soulacy.kernel.store import AlreadyDecided, ApprovalRequest

from ._keeper import (
    ApprovalClosed,
    ApprovalResultRefused,
    approval_store,
    approvals_of,
    result_problem,
)

ENDED = frozenset({"completed", "incomplete", "failed", "cancelled"})  # how runs end


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without one)
        return "operator"


async def approve(args: argparse.Namespace, ctx: CliContext) -> int:
    return await _decide(args, ctx, approved=True)


async def deny(args: argparse.Namespace, ctx: CliContext) -> int:
    return await _decide(args, ctx, approved=False)


async def happened(args: argparse.Namespace, ctx: CliContext) -> int:
    result = args.result
    if result == "-":  # read from standard input, less the newline that ends its last line
        result = ctx.inp.read().removesuffix("\n")
    problem = result_problem(result)
    if problem is not None:
        raise UsageError(f"--result: {problem}")
    return await _decide(args, ctx, approved=False, result=result)


async def _decide(
    args: argparse.Namespace, ctx: CliContext, *, approved: bool, result: str | None = None
) -> int:
    kernel = ctx.kernel()
    approver = (args.approver or "").strip() or _user()
    try:
        gate = approvals_of(kernel)
        try:
            decided = await gate.decide(
                args.run_id,
                args.call_id,
                approved=approved,
                approver=approver,
                note=args.note,
                result=result,
            )
        except (AlreadyDecided, ApprovalClosed, ApprovalResultRefused) as exc:
            raise UsageError(str(exc)) from None
        if decided is None:
            raise UsageError(
                f"no approval request for call {args.call_id!r} of run {args.run_id!r} in the store"
            )
        if not args.json:
            ctx.print(_said(args, approver, approved=approved, happened=result is not None))
        resumed = None
        if decided.resume:
            if not args.json:
                ctx.print(f"the process of run {args.run_id} is gone: resuming it here")
            resumed = await gate.resume(decided.request)
    finally:
        await kernel.aclose()
    if args.json:
        data = {**decided.request.describe(), "woke": decided.woke, "resumed": resumed is not None}
        if resumed is not None:
            data["run"] = {**resumed.metadata(), "reply": resumed.reply}
        ctx.print_json(data)
    elif resumed is not None:
        reason = f" ({resumed.incomplete_reason})" if resumed.incomplete_reason else ""
        ctx.print(f"run {resumed.run_id}: {resumed.status}{reason}, attempt {resumed.attempt}")
        if resumed.reply:
            ctx.print(resumed.reply)
    return 0


def _said(args: argparse.Namespace, approver: str, *, approved: bool, happened: bool) -> str:
    """What a decision's command says it did."""
    call = f"call {args.call_id} of run {args.run_id}"
    if happened:
        return f"{call} happened (approver {approver}): not run again; the model gets its result"
    return f"{'approved' if approved else 'denied'} {call} (approver {approver})"


async def approvals_list(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        found = await approval_store(kernel).list_approvals(args.run_id, pending=not args.all)
        runs = {r.run_id: await kernel.store().get_run(r.run_id) for r in found}
    finally:
        await kernel.aclose()
    statuses = {run_id: run.status if run else None for run_id, run in runs.items()}
    if args.json:
        ctx.print_json([{**r.describe(), "run_status": statuses[r.run_id]} for r in found])
        return 0
    if not found:
        of_run = f" of run {args.run_id!r}" if args.run_id else ""
        ctx.print(f"no {'approval requests' if args.all else 'pending approvals'}{of_run}")
    for request in found:
        ctx.print(_line(request, statuses[request.run_id]))
    return 0


def _line(request: ApprovalRequest, run_status: str | None) -> str:
    described = request.describe()
    ago = max(0.0, time.time() - request.requested_at)
    status = described["status"]
    if request.decision is not None:
        status += f" by {request.decision.approver}"
    elif run_status in ENDED:  # nothing waits for it any more
        status += f" (its run ended {run_status})"
    return (
        f"{request.run_id}  {request.call_id}  {request.tool}({described['arguments']})"
        f"  {status}  agent {request.agent_id}  asked {ago:.0f}s ago"
    )
