"""A call cut by a crash can be told it happened (docs/decisions/0081): ``POST
/api/v1/chat/confirm`` with ``result``, the SDK's ``confirm(..., result=)`` and
:meth:`Approvals.decide`. The result is refused for a call that did not run yet, and another
principal's cut call reads as none."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from _support.http_server import KEYS, keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.kernel.store import ApprovalRequest
from soulacy.plugins.approvals import ApprovalResultRefused, approvals_of
from soulacy.plugins.sqlite_store import SQLiteStore
from soulacy.sdk import AsyncClient, Client, SoulacyError
from soulacy.testing import Workspace

SAID = "sent to bob: message id 42"


def cut_request(run_id: str, call_id: str = "cut:c1", principal: str = "alice") -> ApprovalRequest:
    """A cut call's request as the effect ledger asks it (the run's retry waits on it)."""
    return ApprovalRequest(
        run_id,
        call_id,
        "send",
        {"to": "bob"},
        "a",
        "s",
        principal,
        None,
        {"text": "tell bob", "overrides": {}, "mode": "auto", "cut": call_id.startswith("cut:")},
        ("this call began before its run was cut; its effect is unknown",),
    )


@pytest.fixture
def keyed(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("a", [{"text": "hi"}])
    return workspace


async def test_a_principal_tells_its_cut_call_it_happened_and_another_sees_none(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        store = server.kernel.store()
        await store.request_approval(cut_request("H1"))
        body = {"run_id": "H1", "call_id": "cut:c1", "result": SAID}
        as_bob = await bob.post("/chat/confirm", json=body)
        unknown = await bob.post("/chat/confirm", json={**body, "run_id": "nope"})
        assert (as_bob.status_code, unknown.status_code) == (404, 404)
        assert as_bob.json()["error"] == "no approval request for call 'cut:c1' of run 'H1'"
        async with AsyncClient(server.url, api_key=KEYS["bob"]) as sdk_bob:
            with pytest.raises(SoulacyError) as refused:
                await sdk_bob.confirm("H1", "cut:c1", result=SAID)
            assert refused.value.status == 404
        still = await store.get_approval("H1", "cut:c1")
        assert still is not None
        assert still.pending
        told = await alice.post("/chat/confirm", json={**body, "approver": "ops"})
        assert told.status_code == 200, told.text
        answer = told.json()
        assert (answer["status"], answer["result"], answer["approver"]) == ("happened", SAID, "ops")
        decided = await store.get_approval("H1", "cut:c1")
        assert decided is not None
        assert decided.decision is not None
        assert (decided.decision.approved, decided.decision.result) == (False, SAID)
        again = await alice.post("/chat/confirm", json={**body, "result": "other"})
        assert again.status_code == 409
        assert "was already told it happened by ops" in again.json()["error"]


async def test_the_sdk_tells_a_cut_call_it_happened(
    keyed: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        await server.kernel.store().request_approval(cut_request("H2"))
        async with AsyncClient(server.url, api_key=KEYS["alice"]) as client:
            decided = await client.confirm("H2", "cut:c1", result=SAID, approver="sdk")
    assert (decided["status"], decided["result"], decided["approver"]) == ("happened", SAID, "sdk")


async def test_the_sdk_refuses_a_confirm_without_a_decision_or_with_a_blank_result_unsent() -> None:
    # Nothing listens on port 9: a request sent would be a connection error, not a ValueError.
    async with AsyncClient("http://127.0.0.1:9", api_key="k") as client:
        with pytest.raises(ValueError, match=r"give approved .* or, for a call cut while it ran"):
            await client.confirm("H", "cut:c1")
        with pytest.raises(ValueError, match="result is blank"):
            await client.confirm("H", "cut:c1", result=" ")
    with (
        Client("http://127.0.0.1:9", api_key="k") as sync,
        pytest.raises(ValueError, match="give approved"),
    ):
        sync.confirm("H", "cut:c1")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"call_id": "cut:c1", "result": 42}, "result"),
        ({"call_id": "cut:c1", "result": "x" * 100_001}, "result"),
        ({"call_id": "cut:c1", "result": ""}, "result"),  # an empty result tells nothing
        ({"call_id": "cut:c1", "result": " \n\t"}, "result"),
        ({"call_id": "cut:c1", "approved": True, "result": SAID}, "approved"),
        ({"call_id": "cut:c1"}, "approved"),
        ({"call_id": "c1", "approved": False, "result": SAID}, "result"),  # it did not run yet
    ],
)
async def test_a_bad_result_is_a_422_naming_the_field(
    keyed: Workspace, make_kernel: Callable[..., Kernel], body: dict[str, Any], field: str
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        store = server.kernel.store()
        await store.request_approval(cut_request("H3"))
        await store.request_approval(cut_request("H3", "c1"))
        answer = await alice.post("/chat/confirm", json={"run_id": "H3", **body})
        assert answer.status_code == 422, answer.text
        assert field in answer.json()["fields"], answer.json()
        assert all(r.pending for r in await store.list_approvals("H3"))  # nothing decided


async def test_decide_refuses_a_result_for_a_call_that_did_not_run_yet(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    kernel = make_kernel()
    await kernel.store().request_approval(cut_request("D1", "c1"))
    with pytest.raises(ApprovalResultRefused, match="only a call cut while it ran"):
        await approvals_of(kernel).decide("D1", "c1", approved=False, approver="ops", result=SAID)
    with pytest.raises(ValueError, match="approved"):
        await approvals_of(kernel).decide("D1", "c1", approved=True, approver="ops", result=SAID)
    await kernel.store().request_approval(cut_request("D1"))
    for blank in ("", "  \n"):
        with pytest.raises(ValueError, match="result: expected the call's result: text, not blank"):
            await approvals_of(kernel).decide(
                "D1", "cut:c1", approved=False, approver="ops", result=blank
            )
    assert all(r.pending for r in await kernel.store().list_approvals("D1"))
    found = await kernel.store().get_approval("D1", "c1")
    assert found is not None
    assert found.pending


@pytest.mark.processes
async def test_soulacy_runs_happened_refuses_a_call_that_did_not_run_and_an_unknown_one(
    workspace: Workspace,
) -> None:
    workspace.scripted_agent("a", [{"text": "hi"}])
    store = SQLiteStore(workspace.path / "soulacy.db")
    try:
        await store.request_approval(cut_request("C1", "c1"))
        await store.request_approval(cut_request("C1"))
    finally:
        await store.aclose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}

    def happened(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path)]
        return subprocess.run(
            [*command, "runs", "happened", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    not_run = happened("C1", "c1", "--result", SAID)
    assert not_run.returncode == 2, not_run.stderr
    assert "did not run yet: only a call cut while it ran" in not_run.stderr
    unknown = happened("C1", "cut:c9", "--result", SAID)
    assert unknown.returncode == 2, unknown.stderr
    assert "no approval request for call 'cut:c9' of run 'C1'" in unknown.stderr
    blank = happened("C1", "cut:c1", "--result", "  ")
    assert blank.returncode == 2, blank.stderr
    assert "--result: expected the call's result: text, not blank" in blank.stderr
    missing = happened("C1", "c1")
    assert missing.returncode == 2
    assert "--result" in missing.stderr
    store = SQLiteStore(workspace.path / "soulacy.db")
    try:
        found = await store.get_approval("C1", "c1")
    finally:
        await store.aclose()
    assert found is not None
    assert found.pending
