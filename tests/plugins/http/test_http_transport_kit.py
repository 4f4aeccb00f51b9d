"""The HTTP plugin passes the transport conformance kit (through its public adapter,
``soulacy.plugins.http.testing.HttpAdapter``), each check a test of its own, and its own wire
checks of ``/api/v1``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _support.http_server import KEYS, Server, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.plugins.http.testing import HttpAdapter, check_http_api, parse_sse
from soulacy.testing import (
    TRANSPORT_CHECK_NAMES,
    TransportEvent,
    TransportRefused,
    Workspace,
    check_transport,
)


@pytest.mark.parametrize("check", TRANSPORT_CHECK_NAMES)
async def test_the_http_transport_passes_the_transport_kit(server: Server, check: str) -> None:
    adapter = HttpAdapter(server.url, KEYS)
    await check_transport(
        adapter, "echo", principals=("alice", "bob"), slow_agent_id="slow", only=check
    )


async def test_the_keyless_http_transport_passes_the_transport_kit(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    """Loopback clients only, all of them ``local``: no principals to keep apart (the whole
    kit, which passes over the principals check)."""
    workspace.write_config("server:\n  port: 0\n")
    standard_agents(workspace)
    async with open_server(make_kernel) as server:
        await check_transport(HttpAdapter(server.url), "echo", slow_agent_id="slow")


async def test_the_http_api_passes_its_wire_checks(server: Server) -> None:
    await check_http_api(server.url, "echo", {"Authorization": f"Bearer {KEYS['alice']}"})


async def test_the_adapter_reports_refusals_and_crashes_apart(server: Server) -> None:
    adapter = HttpAdapter(server.url, KEYS)
    with pytest.raises(TransportRefused) as refused:
        await adapter.start_run("no-such-agent", "hi", principal="alice")
    assert (refused.value.kind, refused.value.message) == (
        "not_found",
        "HTTP 404: no agent 'no-such-agent'",
    )
    with pytest.raises(TransportRefused) as unauthorized:
        await HttpAdapter(server.url, {"eve": "wrong"}).start_run("echo", "hi", principal="eve")
    assert unauthorized.value.kind == "unauthorized"
    for what, call in adapter.malformed():
        with pytest.raises(TransportRefused) as bad:
            await call()
        assert bad.value.kind == "invalid", what


def test_sse_bodies_parse_into_events() -> None:
    body = (
        ': keep-alive\n\nid: 1\nevent: run\ndata: {"run_id": "r"}\n\n'
        'event: gap\ndata: {"missed": 2}\n\nid: 4\nevent: result\ndata: not json\n\n'
    )
    assert parse_sse(body) == [
        TransportEvent("1", "run", {"run_id": "r"}),
        TransportEvent("", "gap", {"missed": 2}),
        TransportEvent("4", "result", "not json"),  # type: ignore[arg-type]
    ]
