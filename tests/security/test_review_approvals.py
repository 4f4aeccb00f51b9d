"""Security review of durable tool approvals: another principal can neither see nor decide a
call, and its answer does not tell that the run exists."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

TOOLS_PY = '''
from pathlib import Path


def delete(path: str) -> str:
    """Delete a file (only notes that it ran)."""
    with (Path(__file__).parent / "ran.txt").open("a") as fh:
        fh.write(f"delete {path}\\n")
    return f"deleted {path}"
'''


def _gated(workspace: Workspace) -> Path:
    workspace.scripted_agent(
        "gated",
        [{"tool": "delete", "arguments": {"path": "a.txt"}, "id": "c1"}, {"text": "finished"}],
        tools=["tools.py:delete"],
        confirm_tools=["delete"],
    )
    (workspace.path / "agents" / "gated" / "tools.py").write_text(TOOLS_PY)
    return workspace.path / "agents" / "gated" / "ran.txt"


async def _sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
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


def _shape(answer: httpx.Response, run_id: str) -> tuple[int, str]:
    """Status and error text with the asked ids taken out: what the answer tells."""
    return answer.status_code, answer.json()["error"].replace(run_id, "RUN")


async def test_review_bob_cannot_decide_or_probe_alices_pending_call(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    ran = _gated(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("bob") as bob,
        server.client("root") as root,
    ):
        body = {"agent_id": "gated", "text": "clean", "run_id": "AL1", "session_id": "s"}
        statuses = []
        with trio.fail_after(30):
            async with alice.stream("POST", "/chat/stream", json=body) as response:
                async for event in _sse(response):
                    if event["event"] == "tool.approval":
                        statuses.append(event["data"]["status"])
                    if event["event"] == "tool.approval" and event["data"]["status"] == "pending":
                        for who in (bob, root):  # another principal, an admin included
                            for approved in (True, False):
                                theirs = await who.post(
                                    "/chat/confirm",
                                    json={"run_id": "AL1", "call_id": "c1", "approved": approved},
                                )
                                none = await who.post(
                                    "/chat/confirm",
                                    json={"run_id": "ZZ9", "call_id": "c1", "approved": approved},
                                )
                                assert (
                                    _shape(theirs, "AL1")
                                    == _shape(none, "ZZ9")
                                    == (
                                        404,
                                        "no approval request for call 'c1' of run 'RUN'",
                                    )
                                )
                            events = await who.get("/runs/AL1/events")
                            assert events.status_code == 404
                        stored = await server.kernel.store().get_approval("AL1", "c1")
                        assert stored is not None
                        assert stored.pending
                        assert not ran.exists()
                        mine = await alice.post(
                            "/chat/confirm",
                            json={"run_id": "AL1", "call_id": "c1", "approved": False},
                        )
                        assert mine.status_code == 200, mine.text
        assert statuses == ["pending", "denied"]
        assert not ran.exists()
        # After the decision, bob's second decision is still a 404 (not 409 "already decided").
        late = await bob.post(
            "/chat/confirm", json={"run_id": "AL1", "call_id": "c1", "approved": True}
        )
        assert late.status_code == 404
