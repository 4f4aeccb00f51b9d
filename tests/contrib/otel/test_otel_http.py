"""``GET /metrics`` on the HTTP transport, served by the plugin through ``soulacy_http_routes``:
admins only, over a real server on loopback."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from _support.http_server import KEYS, keyed_config, open_server
from conftest import ADD, ENABLE, tools_plugin

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

QUIET = "otel:\n  exporter: none\n"
PROMETHEUS = "text/plain; version=0.0.4; charset=utf-8"


def server_kernel(make_kernel: Callable[..., Kernel]) -> Callable[..., Kernel]:
    def make(**options: object) -> Kernel:
        return make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"], **options)

    return make


async def test_metrics_on_the_http_port_are_for_admins_only(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE + keyed_config(QUIET))
    workspace.scripted_agent("adder", ADD, tools=["add"])
    async with open_server(server_kernel(make_kernel)) as server:
        async with server.client("alice") as alice:
            chat = await alice.post("/chat", json={"agent_id": "adder", "text": "19 + 23?"})
            assert chat.status_code == 200, chat.text

        async def scrape(who: str | None) -> httpx.Response:
            headers = {"Authorization": f"Bearer {KEYS[who]}"} if who else {}
            async with httpx.AsyncClient(base_url=server.url, headers=headers) as client:
                return await client.get("/metrics")

        admin = await scrape("root")
        assert admin.status_code == 200, admin.text
        assert admin.headers["content-type"] == PROMETHEUS
        assert admin.headers["cache-control"] == "no-store"
        assert 'soulacy_runs_total{soulacy_agent_id="adder",' in admin.text
        assert "# TYPE gen_ai_client_operation_duration_seconds histogram" in admin.text
        other = await scrape("alice")  # a principal with a key, not in server.admins
        assert other.status_code == 403
        assert other.json()["error"] == "this principal is not an admin (server.admins)"
        assert "soulacy_runs_total" not in other.text
        anonymous = await scrape(None)
        assert anonymous.status_code == 401
        assert "soulacy_runs_total" not in anonymous.text
        async with httpx.AsyncClient(base_url=server.url) as client:
            posted = await client.post("/metrics", headers={"Authorization": "Bearer key-root"})
        assert posted.status_code == 405


async def test_keyless_loopback_mode_scrapes_without_a_key(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE + "server:\n  port: 0\n" + QUIET)
    workspace.scripted_agent("adder", ADD, tools=["add"])
    async with open_server(server_kernel(make_kernel)) as server:
        await server.kernel.run("adder", "19 + 23?")
        async with httpx.AsyncClient(base_url=server.url) as client:
            answer = await client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert 'soulacy_runs_total{soulacy_agent_id="adder",' in answer.text


async def test_http_metrics_false_leaves_the_route_out(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(ENABLE + "server:\n  port: 0\n" + QUIET + "  http_metrics: false\n")
    async with (
        open_server(server_kernel(make_kernel)) as server,
        httpx.AsyncClient(base_url=server.url) as client,
    ):
        assert (await client.get("/metrics")).status_code == 404
