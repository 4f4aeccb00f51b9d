"""Security review of MCP server settings in answers: ``GET /config`` (admins) and the portal's
support bundle show ``mcp.servers.*.env`` values whose names do not look secret, and URL query
credentials other than ``api_key=``/``token=``; docs/mcp.md calls headers secrets, and an env
value or URL is where a stdio or HTTP server's credentials usually live."""

from __future__ import annotations

from collections.abc import Callable

from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

MCP = """mcp:
  servers:
    gh:
      command: github-mcp
      enabled: false
      env: {GITHUB_PERSONAL_ACCESS_TOKEN: ghp-token-1111, GH_PAT: ghp-pat-2222}
    search:
      url: https://search.example/mcp?key=qkey-3333
      enabled: false
      headers: {Authorization: Bearer hdr-4444}
"""


async def test_review_mcp_env_and_url_credentials_are_redacted_in_config_answers(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config() + MCP)
    async with open_server(make_kernel) as server, server.client("root") as root:
        config = await root.get("/config")
        bundle = await root.get("/support/bundle")
    assert config.status_code == 200, config.text
    leaked = {
        secret: [
            name
            for name, answer in (("config", config), ("bundle", bundle))
            if secret in answer.text
        ]
        for secret in ("ghp-token-1111", "ghp-pat-2222", "qkey-3333", "hdr-4444")
    }
    assert leaked == {s: [] for s in leaked}, leaked
