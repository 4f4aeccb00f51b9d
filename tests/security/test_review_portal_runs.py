"""Security review of the portal's ``GET /api/v1/runs`` (every principal): it read the newest
``5 x limit`` runs of *every* principal and kept the caller's, so another principal's newer
runs push the caller's own runs out of its list (and each request costs up to 1000 run reads,
each with a proof and a state read, whatever the caller owns)."""

from __future__ import annotations

from collections.abc import Callable

from _support.http_server import keyed_config, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


async def test_review_another_principals_runs_do_not_hide_mine(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("bob") as bob,
        server.client("alice") as alice,
    ):
        own = await bob.post("/chat", json={"agent_id": "echo", "text": "mine", "run_id": "bob-1"})
        assert own.status_code == 200, own.text
        for n in range(6):  # alice's newer runs: more than 5 x limit
            done = await alice.post("/chat", json={"agent_id": "echo", "text": f"a{n}"})
            assert done.status_code == 200, done.text
        listed = await bob.get("/runs", params={"limit": "1"})
        assert listed.status_code == 200, listed.text
        assert [r["run_id"] for r in listed.json()["runs"]] == ["bob-1"], listed.json()
