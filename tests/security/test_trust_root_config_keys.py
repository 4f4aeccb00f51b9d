"""Secrets and data flows are the trust root: ``PATCH /config`` refuses every key that names an
environment variable, an export endpoint or its headers, a listening address, a command, or
turns on content capture — ``422`` naming the field, config.yaml byte for byte as it was. The
same keys written in config.yaml by hand keep working: they are the operator's, not forbidden.

The workspace: principals alice (an admin) and bob (not), a provider ``local`` on an
OpenAI-compatible server, and the OpenTelemetry plugin loaded with its exporter off.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from _support.http_server import KEYS, open_server, standard_agents

from soulacy.kernel import ConfigSection, Kernel
from soulacy.testing import Workspace, throwaway_plugin

KEYS_FLOW = "{" + ", ".join(f"{p}: {k}" for p, k in KEYS.items()) + "}"
CONFIG = f"""\
plugins:
  enable: [soulacy.contrib.otel]
server:
  port: 0
  api_keys: {KEYS_FLOW}
  admins: [alice]
llm:
  providers:
    local:
      type: openai
      base_url: http://127.0.0.1:9/v1   # nothing listens: no test calls it
otel:
  exporter: none
"""
# What the operator may write by hand: the same keys the API refuses.
BY_HAND = """\
      api_key_env: LOCAL_MODEL_KEY
      options: {token_env: LOCAL_MODEL_TOKEN}
"""
OTEL_BY_HAND = """\
  capture_content: true
  endpoint: http://127.0.0.1:9
  headers: {x-team: blue}
  metrics_bind: 127.0.0.1:0
"""

REFUSED = [
    # observation 2: any variable of the server's environment, sent to the admin's server
    (
        {"llm.providers.local.api_key_env": "SOULACY_SERVER__API_KEYS__BOB"},
        "changes.llm.providers.local.api_key_env",
    ),
    (
        {
            "llm": {
                "providers": {
                    "mine": {
                        "type": "openai",
                        "base_url": "http://admin.example/v1",
                        "api_key_env": "PGPASSWORD",
                    }
                }
            }
        },
        "changes.llm.providers.mine.api_key_env",
    ),
    # any *_env key, wherever it is (provider options are free-form)
    (
        {"llm.providers.local.options": {"token_env": "SOULACY_SERVER__API_KEYS__BOB"}},
        "changes.llm.providers.local.options.token_env",
    ),
    ({"postgres": {"dsn_env": "PGPASSWORD"}}, "changes.postgres"),
    # observation 3: where telemetry goes, what it carries, where metrics listen
    ({"otel": {"capture_content": True}}, "changes.otel.capture_content"),
    ({"otel.exporter": "otlp"}, "changes.otel.exporter"),
    ({"otel.endpoint": "http://admin.example:4318"}, "changes.otel.endpoint"),
    ({"otel.headers": {"authorization": "Bearer x"}}, "changes.otel.headers"),
    ({"otel.metrics_bind": "0.0.0.0:9464"}, "changes.otel.metrics_bind"),
    ({"otel": None}, "changes.otel"),  # replacing the section replaces its trust-root keys
    ({"llm.providers.local": None}, "changes.llm.providers.local"),
    # commands and their environment
    ({"mcp.servers.evil.command": "sh"}, "changes.mcp.servers.evil.command"),
    (
        {"mcp": {"servers": {"evil": {"url": "http://admin.example/mcp"}}}},
        "changes.mcp",
    ),
]


@pytest.mark.parametrize(("changes", "field"), REFUSED)
async def test_secret_and_data_flow_keys_are_refused_over_http(
    workspace: Workspace, make_kernel: Callable[..., Kernel], changes: Any, field: str
) -> None:
    workspace.write_config(CONFIG)
    standard_agents(workspace)
    before = (workspace.path / "config.yaml").read_bytes()
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.patch("/config", json={"changes": changes})
        in_force = server.kernel.config
    assert answer.status_code == 422, answer.text
    fields = answer.json()["fields"]
    assert field in fields, fields
    assert "trust root" in fields[field], fields[field]
    assert "edit config.yaml" in fields[field], fields[field]
    assert (workspace.path / "config.yaml").read_bytes() == before, "nothing was saved"
    assert in_force.section("otel").capture_content is False  # nor applied in the process


async def test_bob_who_is_no_admin_changes_no_configuration_at_all(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(CONFIG)
    standard_agents(workspace)
    before = (workspace.path / "config.yaml").read_bytes()
    async with open_server(make_kernel) as server, server.client("bob") as bob:
        refused = await bob.patch("/config", json={"changes": {"otel.sampling": 0.5}})
        hidden = await bob.get("/config")
    assert (refused.status_code, hidden.status_code) == (403, 403)
    assert (workspace.path / "config.yaml").read_bytes() == before


async def test_an_admin_still_tunes_providers_and_telemetry_over_http(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(CONFIG)
    standard_agents(workspace)
    changes = {
        "llm.providers.local.base_url": "http://127.0.0.1:10/v1",
        "llm.providers.local.model": "small",
        "otel": {"sampling": 0.5, "max_content_chars": 100},
    }
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.patch("/config", json={"changes": changes})
    assert answer.status_code == 200, answer.text
    assert set(answer.json()["changed"]) == {
        "llm.providers.local.base_url",
        "llm.providers.local.model",
        "otel.sampling",
        "otel.max_content_chars",
    }


async def test_the_same_keys_written_in_config_yaml_by_hand_are_in_force(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    config = CONFIG.replace("/v1   # nothing listens: no test calls it\n", "/v1\n" + BY_HAND)
    workspace.write_config(config + OTEL_BY_HAND)
    standard_agents(workspace)
    environ = {"LOCAL_MODEL_KEY": "sk-local-1234", "LOCAL_MODEL_TOKEN": "t"}
    async with open_server(make_kernel, environ=environ) as server, server.client("alice") as alice:
        settings = server.kernel.config
        # and another change of the file over HTTP keeps them, byte for byte
        answer = await alice.patch("/config", json={"changes": {"otel.sampling": 0.25}})
    assert answer.status_code == 200, answer.text
    provider = settings.section("llm.providers")["local"]
    assert (provider.api_key_env, provider.options) == (
        "LOCAL_MODEL_KEY",
        {"token_env": "LOCAL_MODEL_TOKEN"},
    )
    otel = settings.section("otel")
    assert (otel.capture_content, otel.endpoint, otel.metrics_bind) == (
        True,
        "http://127.0.0.1:9",
        "127.0.0.1:0",
    )
    saved = (workspace.path / "config.yaml").read_text()
    assert BY_HAND in saved
    assert "  capture_content: true\n" in saved


@attrs.frozen
class Weather:
    endpoint: str = "https://weather.example"
    units: str = "metric"


def weather_plugin() -> object:
    """A third party's plugin: its section, and the key of it that is the trust root."""
    return throwaway_plugin(
        "weather",
        soulacy_config_sections=lambda: [
            ConfigSection("weather", Weather),
            ConfigSection.trust_root("weather.endpoint", doc="where every query is sent"),
        ],
    )


async def test_a_plugin_declares_its_own_trust_root_and_patch_config_keeps_to_it(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(CONFIG)
    standard_agents(workspace)
    before = (workspace.path / "config.yaml").read_bytes()
    async with (
        open_server(make_kernel, extra_plugins=[weather_plugin()]) as server,
        server.client("alice") as alice,
    ):
        refused = await alice.patch(
            "/config", json={"changes": {"weather": {"endpoint": "http://admin.example"}}}
        )
        assert (workspace.path / "config.yaml").read_bytes() == before
        accepted = await alice.patch("/config", json={"changes": {"weather.units": "imperial"}})
    assert refused.status_code == 422, refused.text
    assert "where every query is sent" in refused.json()["fields"]["changes.weather.endpoint"]
    assert accepted.status_code == 200, accepted.text
