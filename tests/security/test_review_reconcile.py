"""Security review of ``POST /api/v1/runs/{id}/reconcile`` (portal, admins): docs/security.md
says an admin "sees no other principal's runs"; the route takes any run id, so an admin
learns that another principal's run exists, that it is running, the pid and host running it,
and its workflow's step ids, and changes its checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel, Tool
from soulacy.testing import Workspace, throwaway_plugin


def _held(gate: trio.Event, started: trio.Event) -> Any:
    async def hold() -> str:
        """Waits until the test lets it go."""
        started.set()
        await gate.wait()
        return "held"

    def fetch() -> str:
        """Fetches nothing."""
        return "fetched"

    return throwaway_plugin(
        "review_held_tools",
        soulacy_tools=lambda kernel, agent_id: [
            Tool.from_function(fetch),
            Tool.from_function(hold),
        ],
    )


async def test_review_an_admin_cannot_probe_another_principals_run_through_reconcile(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    workspace.write_agent(
        "wf",
        {
            "tools": ["fetch", "hold"],
            "workflow": {
                "steps": [{"id": "fetch", "tool": "fetch"}, {"id": "hold", "tool": "hold"}]
            },
        },
    )
    gate, started = trio.Event(), trio.Event()
    answers: dict[str, tuple[int, str]] = {}
    async with open_server(make_kernel, extra_plugins=[_held(gate, started)]) as server:
        kernel = server.kernel
        async with server.client("root") as root, trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: kernel.run("wf", "go", run_id="al-wf", session_id="s", principal="alice")
            )
            await started.wait()
            decision = {"step": "hold", "decision": "failed"}
            for run_id in ("al-wf", "no-such-run"):
                got = await root.post(f"/runs/{run_id}/reconcile", json=decision)
                answers[run_id] = (got.status_code, got.json()["error"].replace(run_id, "RUN"))
            gate.set()
    # An unknown id and alice's run must read alike to root (404, no detail of alice's run).
    assert answers["al-wf"] == answers["no-such-run"], answers
