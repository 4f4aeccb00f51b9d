"""An approval is bound to the arguments shown to the person deciding, and a request nobody
decides expires (issue 40, observation 4): a decision sent with another ``arguments_sha256``
is refused, a retry whose call under the same id has other arguments never runs on the old
decision, and ``approvals.expire_after`` denies (or cancels) with a proof receipt."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import trio
from _support.http_server import open_server
from test_approvals_http import _start_waiting, ran, until_completed, workspace_with_keys

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.store import ApprovalDecision, ApprovalRequest, canonical_json
from soulacy.plugins.approvals import EXPIRED_APPROVER, approval_store
from soulacy.testing import Workspace, throwaway_plugin

__all__ = ["workspace_with_keys"]  # the fixture, used by name


def digest_of(tool: str, arguments: dict[str, Any]) -> str:
    shown = canonical_json({"tool": tool, "arguments": arguments})
    return hashlib.sha256(shown.encode("utf-8")).hexdigest()


async def test_a_decision_for_other_arguments_is_refused_and_the_shown_one_applies(
    workspace_with_keys: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await _start_waiting(server, alice, "B1")
        (pending,) = await server.kernel.store().list_approvals("B1", pending=True)
        shown = pending.describe()["arguments_sha256"]  # as the tool.approval event shows it
        assert shown == digest_of("delete", {"path": "a.txt"})
        other = digest_of("delete", {"path": "everything"})
        body = {"run_id": "B1", "call_id": "c1", "approved": True}
        refused = await alice.post("/chat/confirm", json={**body, "arguments_sha256": other})
        assert refused.status_code == 409, refused.text
        assert "other arguments" in refused.json()["error"]
        # bob's answer is the same with the right digest: no such request for him
        as_bob = await bob.post("/chat/confirm", json={**body, "arguments_sha256": shown})
        assert as_bob.status_code == 404
        assert ran(workspace_with_keys) == []  # nothing was decided yet
        approved = await alice.post("/chat/confirm", json={**body, "arguments_sha256": shown})
        assert approved.status_code == 200, approved.text
        await until_completed(alice, "B1")
        assert ran(workspace_with_keys) == ["delete a.txt"]


def gate_plugin(executions: list[dict[str, Any]]) -> Any:
    def delete(path: str) -> str:
        """Delete a file (counted)."""
        executions.append({"path": path})
        return f"deleted {path}"

    return throwaway_plugin("gate", soulacy_tools=lambda: [Tool.from_function(delete)])


async def test_a_retrys_call_with_other_arguments_never_runs_on_the_old_decision(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """A decision stored for call c1 with path a.txt; the run's retry makes call c1 with
    path b.txt (the model answered otherwise): the approved decision is not for it."""
    workspace.scripted_agent(
        "a",
        [{"tool": "delete", "arguments": {"path": "b.txt"}, "id": "c1"}, {"text": "done"}],
        tools=["delete"],
        confirm_tools=["delete"],
    )
    executions: list[dict[str, Any]] = []
    kernel = make_kernel(extra_plugins=[gate_plugin(executions)])
    store = approval_store(kernel)
    asked = ApprovalRequest("R", "c1", "delete", {"path": "a.txt"}, "a", "s")
    await store.request_approval(asked, None)
    await store.decide_approval("R", "c1", ApprovalDecision(True, "ann"))
    result = await kernel.run("a", "go", run_id="R", session_id="s")
    assert result.status == "completed"
    assert executions == []
    history = await kernel.store().load_history("a", "s")
    (answer,) = [m.content for m in history if m.role == "tool"]
    assert answer.startswith("error: the call of tool 'delete' has other arguments")
    await kernel.aclose()


async def expiring(
    workspace: Workspace, make_kernel: Callable[..., Kernel], on_expiry: str
) -> tuple[Any, list[dict[str, Any]], Kernel]:
    workspace.write_config(f"approvals: {{expire_after: 200ms, on_expiry: {on_expiry}}}\n")
    workspace.scripted_agent(
        "a",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "done"}],
        tools=["delete"],
        confirm_tools=["delete"],
    )
    executions: list[dict[str, Any]] = []
    kernel = make_kernel(extra_plugins=[gate_plugin(executions)])
    with trio.fail_after(20):  # the expiry is the only thing that ends the wait
        result = await kernel.run("a", "go", run_id="E", session_id="s")
    return result, executions, kernel


async def test_a_request_nobody_decides_expires_as_a_denial_with_a_receipt(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    result, executions, kernel = await expiring(workspace, make_kernel, "deny")
    assert result.status == "completed"
    assert executions == []
    (request,) = await approval_store(kernel).list_approvals("E")
    assert request.decision is not None
    assert (request.decision.approved, request.decision.approver) == (False, EXPIRED_APPROVER)
    history = await kernel.store().load_history("a", "s")
    (answer,) = [m.content for m in history if m.role == "tool"]
    assert f"denied by {EXPIRED_APPROVER}: not decided within 0.2s" in answer
    proof = await kernel.store().get_proof("E")
    assert proof is not None
    receipts = {r["call_id"]: r for r in proof.data()["receipts"]}
    assert "approval:c1" in receipts  # the expiry is proved as any decision is
    assert receipts["c1"]["is_error"] is True  # the call answered as denied: it never ran
    await kernel.aclose()


async def test_on_expiry_cancel_ends_the_run_cancelled(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    result, executions, kernel = await expiring(workspace, make_kernel, "cancel")
    assert (result.status, result.incomplete_reason) == ("cancelled", "approval_expired")
    assert executions == []
    (request,) = await approval_store(kernel).list_approvals("E")
    assert request.decision is not None
    assert request.decision.approver == EXPIRED_APPROVER
    assert json.loads(json.dumps(request.describe()))["status"] == "denied"
    await kernel.aclose()
