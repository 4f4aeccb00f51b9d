"""What an admin may not change over HTTP, and strings no store can keep (security review).

``PATCH /config`` changes settings; it does not change who is trusted (keys, admins, hosts,
origins, the bind address), which code runs (plugins) or where data lives (the store): those
are edited in config.yaml, and apply at restart. A lone surrogate is valid JSON but not valid
Unicode: it is refused before a run starts, instead of a run failing half-recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from _support.http_server import keyed_config, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"server": {"admins": ["root", "bob"]}}, "changes.server.admins"),
        ({"server": {"api_keys": {"eve": "eve-key-0123456789"}}}, "changes.server.api_keys"),
        ({"server": None}, "changes.server"),
        ({"server.allowed_origins": ["http://evil.example"]}, "changes.server.allowed_origins"),
        ({"plugins": {"enable": ["os"]}}, "changes.plugins"),
        ({"store": {"path": "/tmp/elsewhere.db"}}, "changes.store"),
    ],
)
async def test_the_trust_root_is_not_changeable_over_http(
    workspace: Workspace, make_kernel: Callable[..., Kernel], changes: Any, field: str
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    before = (workspace.path / "config.yaml").read_text()
    async with open_server(make_kernel) as server, server.client("root") as root:
        answer = await root.patch("/config", json={"changes": changes})
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["fields"]
    assert "edit config.yaml" in answer.json()["fields"][field]
    assert (workspace.path / "config.yaml").read_text() == before, "nothing was saved"


async def test_other_settings_still_change_over_http(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    async with open_server(make_kernel) as server, server.client("root") as root:
        answer = await root.patch(
            "/config",
            json={
                "changes": {"server": {"events_per_run": 5000}, "runtime": {"default_max_turns": 0}}
            },
        )
    assert answer.status_code == 200, answer.text
    assert set(answer.json()["changed"]) >= {"server.events_per_run", "runtime.default_max_turns"}


@pytest.mark.parametrize("field", ["text", "user_id", "session_id"])
async def test_a_lone_surrogate_is_a_422_and_starts_nothing(
    workspace: Workspace, make_kernel: Callable[..., Kernel], field: str
) -> None:
    workspace.write_config(keyed_config())
    standard_agents(workspace)
    fields = {"agent_id": "echo", "text": "hi", "run_id": "sur-1", field: "\ud800"}
    body = json.dumps(fields)  # escaped as \ud800: valid JSON, not valid Unicode
    async with open_server(make_kernel) as server, server.client("alice") as alice:
        answer = await alice.post(
            "/chat", content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
        assert "surrogate" in answer.json()["fields"]["body"]
        assert await server.kernel.store().get_run("sur-1") is None
