"""``server.max_body_bytes`` and ``server.max_json_depth`` are read at each request, like the
other request limits: an admin's ``PATCH /config`` applies to the next request, no restart."""

from __future__ import annotations

from collections.abc import Callable

from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


async def test_a_patched_body_limit_applies_to_the_next_request(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("echo", [{"text": "hi"}], repeat=True)
    long = {"agent_id": "echo", "text": "x" * 5000}
    deep = {"agent_id": "echo", "text": "hi", "overrides": {"budget": {"a": {"b": {"c": {}}}}}}
    served = open_server(make_kernel)
    async with served as server, server.client("root") as root:
        assert (await root.post("/chat", json=long)).status_code == 200
        change = {"changes": {"server": {"max_body_bytes": 1024, "max_json_depth": 3}}}
        assert (await root.patch("/config", json=change)).status_code == 200
        too_big = await root.post("/chat", json=long)
        assert too_big.status_code == 413, too_big.text
        too_deep = await root.post("/chat", json=deep)
        assert too_deep.status_code == 422, too_deep.text
        assert "body" in too_deep.json()["error"]
