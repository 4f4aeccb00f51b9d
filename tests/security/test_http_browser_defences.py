"""Host allow-list (DNS rebinding), Origin checks (CSRF) and CORS preflight."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import httpx
import pytest
from _support.http_server import Server, host_port, keyed_config, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

FRIEND = "http://app.example.test:3000"


def _keyless(
    workspace: Workspace, make_kernel: Callable[..., Kernel], extra: str = ""
) -> AbstractAsyncContextManager[Server]:
    """A server without keys (loopback mode), where only these defences stand."""
    workspace.write_config(f"server:\n  port: 0\n{extra}")
    standard_agents(workspace)
    return open_server(make_kernel)


def _client(server: Server, **headers: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url + "/api/v1", headers=headers, timeout=30)


@pytest.mark.parametrize(
    "host", ["evil.example.com", "evil.example.com:{port}", "127.0.0.1.nip.io:{port}"]
)
async def test_a_foreign_host_header_is_a_421(
    workspace: Workspace, make_kernel: Callable[..., Kernel], host: str
) -> None:
    async with _keyless(workspace, make_kernel) as server:
        port = host_port(server.url)[1]
        async with _client(server, Host=host.format(port=port)) as client:
            for method, path in [("GET", "/health"), ("GET", "/agents"), ("POST", "/chat")]:
                response = await client.request(
                    method, path, json={"agent_id": "echo", "text": "x"}
                )
                assert response.status_code == 421, (method, path, response.text)
        assert await server.kernel.store().history("any") == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "localhost"]
)
async def test_the_default_hosts_are_served(
    workspace: Workspace, make_kernel: Callable[..., Kernel], host: str
) -> None:
    async with _keyless(workspace, make_kernel) as server:
        port = host_port(server.url)[1]
        async with _client(server, Host=host.format(port=port)) as client:
            assert (await client.get("/agents")).status_code == 200


async def test_server_allowed_hosts_adds_names(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with _keyless(workspace, make_kernel, "  allowed_hosts: [agents.internal]\n") as server:
        async with _client(server, Host="agents.internal") as client:
            assert (await client.get("/agents")).status_code == 200
        async with _client(server, Host="evil.example.com") as client:
            assert (await client.get("/agents")).status_code == 421


STATE_CHANGING = [
    ("POST", "/chat", {"agent_id": "echo", "text": "x", "run_id": "csrf-1"}),
    ("POST", "/chat/stream", {"agent_id": "echo", "text": "x", "run_id": "csrf-2"}),
    ("POST", "/chat/cancel", {"run_id": "csrf-3"}),
    ("PATCH", "/config", {"changes": {"runtime": {"max_turns_ceiling": 7}}}),
    ("POST", "/runs/csrf-4/token", None),
]


@pytest.mark.parametrize(("method", "path", "body"), STATE_CHANGING)
@pytest.mark.parametrize("origin", ["http://evil.example.com", "null", "http://127.0.0.1:1"])
async def test_a_foreign_origin_cannot_change_state(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    method: str,
    path: str,
    body: object,
    origin: str,
) -> None:
    async with _keyless(workspace, make_kernel) as server:
        before = server.kernel.config_file.read_bytes()
        async with _client(server, Origin=origin) as client:
            response = await client.request(method, path, json=body)
            assert response.status_code == 403, response.text
            assert "origin" in response.json()["error"].lower()
            assert "access-control-allow-origin" not in response.headers
        async with _client(server) as client:
            assert (await client.get("/runs/csrf-1")).status_code == 404
            assert (await client.get("/runs/csrf-2")).status_code == 404
        assert server.kernel.config_file.read_bytes() == before


async def test_same_origin_and_listed_origins_may_change_state(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    async with _keyless(workspace, make_kernel, f"  allowed_origins: ['{FRIEND}']\n") as server:
        for origin in (server.url, FRIEND):
            async with _client(server, Origin=origin) as client:
                response = await client.post("/chat", json={"agent_id": "echo", "text": "x"})
                assert response.status_code == 200, response.text
        async with _client(server) as client:  # no Origin: not a browser
            assert (await client.post("/chat", json={"agent_id": "echo", "text": "x"})).is_success


async def test_cors_preflight_answers_allowed_origins_only(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config(f"  allowed_origins: ['{FRIEND}']\n"))
    standard_agents(workspace)
    async with open_server(make_kernel) as server:
        preflight = {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        }
        async with _client(server, Origin=FRIEND, **preflight) as client:
            ok = await client.options("/chat/stream")
        assert ok.status_code == 204, ok.text
        assert ok.headers["access-control-allow-origin"] == FRIEND
        assert "POST" in ok.headers["access-control-allow-methods"]
        allowed_headers = ok.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed_headers
        assert "content-type" in allowed_headers
        assert "origin" in ok.headers["vary"].lower()
        async with _client(server, Origin="http://evil.example.com", **preflight) as client:
            refused = await client.options("/chat/stream")
        assert refused.status_code == 403
        assert "access-control-allow-origin" not in refused.headers
        # The actual request from the allowed origin, with a key, can read its answer.
        async with server.client("alice") as alice:
            alice.headers["Origin"] = FRIEND
            answer = await alice.post("/chat", json={"agent_id": "echo", "text": "x"})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == FRIEND
        assert "soulacy-events-token" in answer.headers["access-control-expose-headers"].lower()
