"""The support bundle holds only what its caller may see: called by alice (an admin), it has no
run id, conversation text or event of bob's, and called by bob, none of alice's — their failed
runs included, and the warnings and errors logged about them. A principal that is no admin
gets no bundle (``403``), as for the configuration."""

from __future__ import annotations

import json
from collections.abc import Callable

from _support.http_server import KEYS, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

KEYS_FLOW = "{" + ", ".join(f"{p}: {k}" for p, k in KEYS.items()) + "}"
# Both are admins here, so that each asks for a bundle; root is not.
CONFIG = f"server:\n  port: 0\n  api_keys: {KEYS_FLOW}\n  admins: [alice, bob]\n"


def broken_agent(workspace: Workspace) -> None:
    """An agent whose model cannot be called: each run of it fails, and the failure is logged."""
    workspace.write_agent(
        "broken", {"llm": {"provider": "scripted", "model": "agents/broken/gone.yaml"}}
    )


async def test_each_admins_bundle_holds_none_of_the_other_principals_runs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(CONFIG)
    standard_agents(workspace)
    broken_agent(workspace)
    bundles = {}
    async with open_server(make_kernel, plugins=["no:scheduler"]) as server:
        for who in ("alice", "bob"):
            async with server.client(who) as client:
                for agent, n in (("echo", 1), ("broken", 2)):
                    answer = await client.post(
                        "/chat",
                        json={
                            "agent_id": agent,
                            "text": f"private words of {who}",
                            "run_id": f"{who}-run-{n}",
                            "session_id": f"{who}-session",
                        },
                    )
                    assert answer.status_code == 200, answer.text
        for who in ("alice", "bob"):
            async with server.client(who) as client:
                answer = await client.get("/support/bundle")
                assert answer.status_code == 200, answer.text
                bundles[who] = answer.text
        async with server.client("root") as root:
            refused = await root.get("/support/bundle")
    assert refused.status_code == 403
    for who, other in (("alice", "bob"), ("bob", "alice")):
        text, bundle = bundles[who], json.loads(bundles[who])
        assert [r["run_id"] for r in bundle["failed_runs"]] == [f"{who}-run-2"]
        for mark in (f"{other}-run-1", f"{other}-run-2", f"{other}-session", f"words of {other}"):
            assert mark not in text, (who, mark, [e for e in bundle["recent_errors"]])
