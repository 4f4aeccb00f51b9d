"""``POST /api/v1/chat/confirm`` on a real server on loopback, two principals, SSE."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _support.http_server import Server, keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

OPENAPI = Path(__file__).parents[3] / "plugins" / "http" / "openapi.json"

TOOLS_PY = '''
from pathlib import Path


def delete(path: str) -> str:
    """Delete a file (only notes that it ran)."""
    with (Path(__file__).parent / "ran.txt").open("a") as fh:
        fh.write(f"delete {path}\\n")
    return f"deleted {path}"
'''


def gated_agent(workspace: Workspace, agent_id: str = "gated") -> Path:
    workspace.scripted_agent(
        agent_id,
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
    )
    (workspace.path / "agents" / agent_id / "tools.py").write_text(TOOLS_PY)
    return workspace.path / "agents" / agent_id / "ran.txt"


def ran(workspace: Workspace, agent_id: str = "gated") -> list[str]:
    path = workspace.path / "agents" / agent_id / "ran.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def workspace_with_keys(workspace: Workspace) -> Workspace:
    workspace.write_config(keyed_config())
    gated_agent(workspace)
    return workspace


async def sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The events of a streaming SSE response, as they arrive."""
    block: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if "event" in block:
                block["data"] = json.loads(block["data"])
                yield block
            block = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(": ")
            block[key] = value


async def test_the_stream_shows_the_request_then_after_confirm_the_result(
    workspace_with_keys: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as server:
        seen: list[dict[str, Any]] = []
        async with server.client("alice") as alice, server.client("alice") as approver:
            body = {"agent_id": "gated", "text": "clean up", "run_id": "H1", "session_id": "s"}
            with trio.fail_after(30):
                async with alice.stream("POST", "/chat/stream", json=body) as response:
                    assert response.status_code == 200
                    async for event in sse(response):
                        seen.append(event)
                        if event["event"] == "tool.approval":
                            if event["data"]["status"] != "pending":
                                continue
                            assert ran(workspace_with_keys) == []  # it waits
                            confirm = await approver.post(
                                "/chat/confirm",
                                json={
                                    "run_id": "H1",
                                    "call_id": "c1",
                                    "approved": True,
                                    "approver": "carol",
                                },
                            )
                            assert confirm.status_code == 200, confirm.text
                            answer = confirm.json()
                            assert (answer["status"], answer["approver"]) == ("approved", "carol")
                            assert (answer["decided_by"], answer["woke"]) == ("alice", True)
            seen = [e for e in seen if e["event"] != "delta"]
            names = [(e["event"], e["data"].get("status")) for e in seen]
            approval_at = names.index(("tool.approval", "pending"))
            assert names[approval_at:] == [
                ("tool.approval", "pending"),
                ("tool.approval", "approved"),
                ("tool.result", None),
                ("result", "completed"),
            ]
            pending = seen[approval_at]["data"]
            assert (pending["id"], pending["name"], pending["arguments"]) == (
                "c1",
                "delete",
                {"path": "a.txt"},
            )
            assert seen[approval_at + 2]["data"]["is_error"] is False
            assert ran(workspace_with_keys) == ["delete a.txt"]
            # A second decision of the same call: 409, and the first one stands.
            again = await approver.post(
                "/chat/confirm", json={"run_id": "H1", "call_id": "c1", "approved": False}
            )
            assert again.status_code == 409
            assert "already approved by carol" in again.json()["error"]
            assert again.json()["approval"]["status"] == "approved"
            # The proof holds the decision.
            run = (await alice.get("/runs/H1")).json()
            receipts = run["proof"]["receipts"]
            assert [r["call_id"] for r in receipts] == ["approval:c1", "c1"]
            assert json.loads(receipts[0]["result"])["approver"] == "carol"


async def test_another_principal_cannot_decide_and_learns_nothing_of_the_run(
    workspace_with_keys: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
    ):
        await _start_waiting(server, alice, "H2")
        as_bob = await bob.post(
            "/chat/confirm", json={"run_id": "H2", "call_id": "c1", "approved": True}
        )
        unknown = await bob.post(
            "/chat/confirm", json={"run_id": "nope", "call_id": "c1", "approved": True}
        )
        assert (as_bob.status_code, unknown.status_code) == (404, 404)
        # The same answer as for a run that does not exist, but for the ids it was given.
        assert as_bob.json()["error"] == "no approval request for call 'c1' of run 'H2'"
        assert unknown.json()["error"] == "no approval request for call 'c1' of run 'nope'"
        assert ran(workspace_with_keys) == []
        denied = await alice.post(
            "/chat/confirm",
            json={"run_id": "H2", "call_id": "c1", "approved": False, "note": "not today"},
        )
        assert denied.status_code == 200, denied.text
        assert (denied.json()["status"], denied.json()["approver"]) == ("denied", "alice")
        await until_completed(alice, "H2")
        history = (await alice.get("/history/s2")).json()["entries"]
        refusal = [e for e in history if e["role"] == "tool"]
        assert refusal[0]["content"] == (
            "error: the call of tool 'delete' was denied by alice: not today; it did not run"
        )
        assert ran(workspace_with_keys) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"run_id": "H3", "call_id": "c1", "approved": "yes"}, "approved"),
        ({"call_id": "c1", "approved": True}, "run_id"),
        ({"run_id": "H3", "approved": True}, "call_id"),
        ({"run_id": "H3", "call_id": "c/1", "approved": True}, "call_id"),
        ({"run_id": "H3", "call_id": "c1", "approved": True, "approver": " "}, "approver"),
        ({"run_id": "H3", "call_id": "c1", "approved": True, "by": "x"}, "by"),
        (["H3", "c1"], "body"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    workspace_with_keys: Workspace,
    make_kernel: Callable[..., Kernel],
    body: Any,
    field: str,
) -> None:
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.post("/chat/confirm", json=body)
        assert answer.status_code == 422, answer.text
        assert field in answer.json()["fields"], answer.json()


async def test_a_server_restarted_while_a_run_waits_resumes_it_on_confirm(
    workspace_with_keys: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with open_server(make_kernel) as first, first.client("alice") as alice:
        await _start_waiting(first, alice, "H4")
    # The first server stopped with the run waiting: it reads as interrupted.
    async with open_server(make_kernel) as second, second.client("alice") as alice:
        before = (await alice.get("/runs/H4")).json()
        assert (before["status"], before["attempt"]) == ("interrupted", 1)
        confirm = await alice.post(
            "/chat/confirm", json={"run_id": "H4", "call_id": "c1", "approved": True}
        )
        assert confirm.status_code == 200, confirm.text
        assert confirm.json()["resumed"] is True
        await until_completed(alice, "H4")
        after = (await alice.get("/runs/H4")).json()
        assert (after["attempt"], after["metadata"]["tool_calls"]) == (2, 1)
        events = await alice.get("/runs/H4/events")
        assert '"status": "completed"' in events.text
        assert "event: tool.approval" in events.text  # the decision, found by the replay
    assert ran(workspace_with_keys) == ["delete a.txt"]


def test_the_confirm_route_is_in_the_openapi_document() -> None:
    document = json.loads(OPENAPI.read_text())
    operation = document["paths"]["/chat/confirm"]["post"]
    assert {"200", "404", "409", "422"} <= set(operation["responses"])


async def _start_waiting(server: Server, client: httpx.AsyncClient, run_id: str) -> None:
    """Start a run of the gated agent and return once it waits for approval."""
    session = "s" + run_id[1:]
    body = {"agent_id": "gated", "text": "clean up", "run_id": run_id, "session_id": session}
    # The run goes on in the server's nursery when the request is dropped.
    async with trio.open_nursery() as nursery:

        async def chat() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the request is dropped below
                await client.post("/chat", json=body, timeout=60)

        nursery.start_soon(chat)
        with trio.fail_after(30):
            while True:
                pending = await server.kernel.store().list_approvals(run_id, pending=True)
                if pending:
                    break
                await trio.sleep(0.02)
        nursery.cancel_scope.cancel()


async def until_completed(client: httpx.AsyncClient, run_id: str) -> None:
    with trio.fail_after(30):
        while (await client.get(f"/runs/{run_id}")).json().get("status") != "completed":  # noqa: ASYNC110
            await trio.sleep(0.05)


async def test_the_sdk_confirms_and_says_a_second_decision_is_a_409(
    workspace_with_keys: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    from _support.http_server import KEYS

    from soulacy.sdk import AsyncClient, SoulacyError

    async with open_server(make_kernel) as server, server.client("alice") as alice:
        await _start_waiting(server, alice, "H5")
        async with AsyncClient(server.url, api_key=KEYS["alice"]) as client:
            decided = await client.confirm("H5", "c1", approved=True, approver="sdk")
            assert (decided["status"], decided["approver"], decided["woke"]) == (
                "approved",
                "sdk",
                True,
            )
            with pytest.raises(SoulacyError) as refused:
                await client.confirm("H5", "c1", approved=False)
            assert refused.value.status == 409
        await until_completed(alice, "H5")
    assert ran(workspace_with_keys) == ["delete a.txt"]
