"""What the A2A plugin declares: its routes, as its OpenAPI paths name them, and its SOUL.yaml
keys, ``a2a_agents`` being the trust root."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from soulacy.kernel import ConfigSection, Kernel
from soulacy.plugins.http import HttpRoute
from soulacy.testing import Workspace

FRAGMENT = Path(__file__).parents[3] / "plugins" / "a2a" / "openapi.json"


def as_openapi(route: HttpRoute) -> str:
    path = route.path.replace("\\.", ".")
    return re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", path)


def test_the_openapi_paths_are_the_routes_the_plugin_adds(
    make_kernel: Callable[..., Kernel],
) -> None:
    kernel = make_kernel()
    found = kernel.pm.unique_contributions("soulacy_http_routes", "HTTP route", kernel=kernel)
    routes = [route for route, plugin in found.values() if plugin == "a2a"]
    declared = {(as_openapi(r), r.method.lower(), r.auth) for r in routes}
    paths = json.loads(FRAGMENT.read_text(encoding="utf-8"))["paths"]
    documented = {
        (path, method, "key")
        for path, item in paths.items()
        for method, operation in item.items()
        if method != "servers" and "401" in operation["responses"]
    }
    assert declared == documented
    # The card is at the server's root (RFC 8615), the others under /api/v1.
    assert {r.path.startswith("/\\.well-known") for r in routes if not r.api} == {True}


def test_remote_agents_are_the_trust_root_an_http_editor_cannot_change(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("caller", [{"text": "x"}])
    kernel = make_kernel()
    changes = {"a2a_agents": {"evil": {"url": "https://attacker.example", "api_key_env": "KEY"}}}
    refused = ConfigSection.trust_root_changes(
        kernel.sections, changes, "agent", kernel=kernel, agent_id="caller"
    )
    assert "a2a_agents" in refused
    skills = {"a2a_skills": [{"id": "routes"}]}
    assert not ConfigSection.trust_root_changes(
        kernel.sections, skills, "agent", kernel=kernel, agent_id="caller"
    )
