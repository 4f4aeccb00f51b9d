"""Keys and principals of the HTTP transport: no empty key, no special name, admins listed."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import httpx
import pytest
from _support.http_server import KEYS, keyed_config, open_server, standard_agents

from soulacy.kernel import ConfigError, Kernel
from soulacy.plugins.http._principals import is_loopback
from soulacy.testing import Workspace


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_key_from_the_environment_is_a_config_error_naming_the_variable(
    workspace: Workspace, make_kernel: Callable[..., Kernel], value: str
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel(environ={"SOULACY_SERVER__API_KEYS__GHOST": value})
    assert "environment variable SOULACY_SERVER__API_KEYS__GHOST" in str(caught.value)
    assert "server.api_keys.ghost" in str(caught.value)


def test_an_empty_key_in_the_file_is_a_config_error_naming_file_and_line(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("server:\n  port: 0\n  api_keys:\n    alice: key-alice\n    bob: ' '\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert "config.yaml:5" in str(caught.value)
    assert "server.api_keys.bob" in str(caught.value)
    assert "key-alice" not in str(caught.value)


def test_config_validate_reports_an_empty_key(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    workspace.write_config("server:\n  port: 0\n")
    done = soulacy_cli(
        ["--workspace", str(workspace.path), "config", "validate"],
        cwd=workspace.path,
        env={"SOULACY_SERVER__API_KEYS__GHOST": ""},
    )
    assert done.returncode != 0, done.stdout
    assert "SOULACY_SERVER__API_KEYS__GHOST" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ("api_keys: {local: key-x}", "server.api_keys.local"),  # the keyless mode's principal
        ("api_keys: {a: same, b: same}", "server.api_keys.b"),  # one key, two principals
        ("api_key: k1\n  api_keys: {default: k2}", "server.api_keys.default"),
    ],
)
def test_ambiguous_principals_are_config_errors(
    workspace: Workspace, make_kernel: Callable[..., Kernel], server: str, message: str
) -> None:
    workspace.write_config(f"server:\n  port: 0\n  {server}\n")
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        make_kernel()


async def test_server_api_key_is_the_principal_default_and_not_an_admin(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("server:\n  port: 0\n  api_key: the-one-key\n")
    standard_agents(workspace)
    async with open_server(make_kernel) as server:
        headers = {"Authorization": "Bearer the-one-key"}
        async with httpx.AsyncClient(base_url=server.url + "/api/v1", headers=headers) as client:
            done = await client.post("/chat", json={"agent_id": "echo", "text": "hi"})
            assert done.status_code == 200, done.text
            assert (await client.get("/config")).status_code == 403
        record = await server.kernel.store().get_run(done.json()["run_id"])
        assert record is not None
        assert record.principal == "default"
        async with httpx.AsyncClient(base_url=server.url + "/api/v1") as anonymous:
            assert (await anonymous.get("/agents")).status_code == 401


async def test_the_bearer_scheme_with_an_empty_token_is_refused(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        httpx.AsyncClient(base_url=server.url + "/api/v1") as client,
    ):
        # (A trailing blank is stripped on the wire: "Bearer " arrives as "Bearer".)
        for header in ("Bearer", "bearer", KEYS["alice"], f"Basic {KEYS['alice']}"):
            response = await client.get("/agents", headers={"Authorization": header})
            assert response.status_code == 401, header


async def test_admin_rights_come_only_from_server_admins(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("alice") as alice,
        server.client("root") as root,
    ):
        done = (await alice.post("/chat", json={"agent_id": "echo", "text": "a"})).json()
        assert (await alice.get("/config")).status_code == 403
        assert (await root.get("/config")).status_code == 200
        # An admin administers the configuration, not other principals' runs.
        assert (await root.get(f"/runs/{done['run_id']}")).status_code == 404


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.0.0.1", False),
        ("10.0.0.1", False),
        ("localhost", False),  # a name is not an address: never trusted as loopback
        (None, False),
    ],
)
def test_ipv4_mapped_loopback_is_loopback(address: str | None, loopback: bool) -> None:
    assert is_loopback(address) is loopback
