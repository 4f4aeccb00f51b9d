"""The builtin ``mcp_server`` plugin: the workspace's agents as the tools of an MCP server.

Each agent is one MCP tool, named by its id and described by its SOUL.yaml ``description``; a
call (``{"text": ..., "session_id": ...?}``) is one run of the agent, answered with the run's
reply, or with a tool error saying how the run ended when it did not complete. The result's
``_meta`` is the run's reply metadata (``run_id``, ``session_id``, ``status`` …).

- ``soulacy serve`` serves it over streamable HTTP at ``POST /mcp``, a route of the HTTP plugin
  (``soulacy_http_routes``) behind its Host and Origin checks and its bearer keys: a call's run
  is stored under the caller's principal. Every principal may call every agent (agents are the
  workspace's; runs and conversations are a principal's). On by default: until the first
  request it costs one route; the SDK is imported then.
- ``soulacy mcp serve --stdio`` serves it over standard input and output, for desktop clients
  that start their servers as processes; its runs have no principal, as ``soulacy run``'s.

The ``mcp`` package (``pip install 'soulacy[mcp]'``) is needed to serve; disable the plugin
(``plugins: {disable: [mcp_server]}``) to serve no ``/mcp`` route. See docs/mcp.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import CliCommand, StashKey, hookimpl

if TYPE_CHECKING:  # the route imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import Kernel

    from ._http import McpHttp  # noqa: F401  (the stash key's type, a string)

__all__: list[str] = []

_HERE = "soulacy.plugins.mcp_server"
_http_key = StashKey["McpHttp"]("mcp_server http")


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[Any]:
    from soulacy.plugins.http import HttpRoute

    from ._http import PATH, McpHttp

    served = kernel.stash.get(_http_key, None)
    if served is None:
        served = kernel.stash[_http_key] = McpHttp(kernel)
    return [HttpRoute("POST", PATH, served.handle, auth="key", api=False)]


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    # Declared by name (decision 0036): `soulacy --help` imports neither the SDK nor trio.
    return [
        CliCommand(
            "mcp serve",
            "serve the workspace's agents as MCP tools over stdio (for desktop MCP clients)",
            f"{_HERE}._stdio:serve_stdio",
            f"{_HERE}._args:configure_serve",
        ),
    ]
