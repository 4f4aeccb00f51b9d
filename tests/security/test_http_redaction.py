"""GET /config hides every value whose key names a secret, at any depth."""

from __future__ import annotations

from collections.abc import Callable

from _support.http_server import keyed_config, open_server, standard_agents

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

SECRETS = ["sk-live-1", "hunter2", "cookie-jar", "tok-123", "shh", "sk-opt-2"]


async def test_get_config_hides_secrets_at_any_depth_headers_included(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        keyed_config(
            "llm:\n"
            "  providers:\n"
            "    proxied:\n"
            "      type: openai\n"
            "      base_url: http://127.0.0.1:9/v1\n"
            "      options:\n"
            "        headers:\n"
            "          Authorization: Bearer sk-live-1\n"
            "          X-Proxy-Password: hunter2\n"
            "          Cookie: cookie-jar\n"
            "          X-Request-Source: docs\n"
            "        nested: [{auth_token: tok-123}, {client_secret: shh}]\n"
            "        api_key: sk-opt-2\n"
            "        chars_per_token: 4\n"
        )
    )
    standard_agents(workspace)
    async with (
        open_server(make_kernel) as server,
        server.client("root") as root,
        server.client("alice") as alice,
    ):
        shown = await root.get("/config")
        assert (await alice.get("/config")).status_code == 403
    assert shown.status_code == 200, shown.text
    for secret in [*SECRETS, "key-alice", "key-bob", "key-root"]:
        assert secret not in shown.text, secret
    options = shown.json()["config"]["llm"]["providers"]["proxied"]["options"]
    assert options["chars_per_token"] == 4  # a setting, not a secret
    headers = options["headers"]
    # Every header value is hidden: vendors carry credentials under names no list knows
    # (x-honeycomb-team), so a header's name cannot tell a setting from a secret.
    assert headers["X-Request-Source"] == "***"
    assert headers["Authorization"] == "***"
