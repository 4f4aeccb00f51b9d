"""``soulacy mcp tools [SERVER ...] [--json]``: the tools each configured MCP server offers.

Each server is started once (as ``soulacy run`` would start it: its command, environment and
folder, or its URL and headers), asked for its tools, and stopped; the servers are asked
together. Nothing else of the kernel starts. Imported only when the command runs (the launcher
lists ``soulacy --help`` from the declaration in ``__init__``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from soulacy.kernel import UsageError

from ._model import McpConfig, McpServer, tool_name

if TYPE_CHECKING:
    from soulacy.kernel import CliContext


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("servers", nargs="*", metavar="SERVER", help="only these servers")
    parser.add_argument("--json", action="store_true", help="print JSON")


async def _listing(server_id: str, server: McpServer, workspace: Path) -> dict[str, Any]:
    """One server's answer: its tools (name, the server's own name, description), or why
    it could not be asked."""
    from mcp import Client

    from ._service import ServerConnection, _list_all, describe

    connection = ServerConnection(server_id, server, workspace, needed=False)
    row: dict[str, Any] = {"server": server_id, "transport": server.kind}
    try:
        with trio.fail_after(float(server.startup_timeout.seconds)):
            async with Client(connection._transport(), cache=None) as client:
                tools = await _list_all(client)
    except trio.TooSlowError:
        row.update(error=f"no answer within startup_timeout {server.startup_timeout.seconds}s")
        return row
    except Exception as exc:  # one server's failure is its row, not the command's end
        row.update(error=describe(exc))
        return row
    row["tools"] = [
        {
            "name": tool_name(server_id, tool.name),
            "server_name": tool.name,
            "description": " ".join((tool.description or "").split()),
        }
        for tool in tools
    ]
    return row


async def list_tools(args: argparse.Namespace, ctx: CliContext) -> int:
    from ._service import _import_sdk

    kernel = ctx.kernel()
    try:
        config: McpConfig = kernel.config.section("mcp")
        workspace = Path(kernel.workspace)
    finally:
        await kernel.aclose()
    unknown = [sid for sid in args.servers if sid not in config.servers]
    if unknown:
        known = ", ".join(sorted(config.servers)) or "none"
        raise UsageError(f"no MCP server {', '.join(map(repr, unknown))} (configured: {known})")
    # Named servers even when disabled; otherwise every enabled one, in config.yaml's order.
    wanted = (
        set(args.servers)
        if args.servers
        else {sid for sid, server in config.servers.items() if server.enabled}
    )
    chosen = {sid: server for sid, server in config.servers.items() if sid in wanted}
    rows: dict[str, dict[str, Any]] = {}
    if chosen:
        await trio.to_thread.run_sync(_import_sdk)  # seconds of imports: not on the Trio thread

        async def ask(sid: str, server: McpServer) -> None:
            rows[sid] = await _listing(sid, server, workspace)

        async with trio.open_nursery() as nursery:
            for sid, server in chosen.items():
                nursery.start_soon(ask, sid, server)
    ordered = [rows[sid] for sid in chosen]
    failed = any("error" in row for row in ordered)
    if args.json:
        ctx.print_json(ordered)
        return 1 if failed else 0
    if not ordered:
        ctx.print("no MCP servers (mcp.servers in config.yaml)")
    for row in ordered:
        if "error" in row:
            ctx.print(f"{row['server']} ({row['transport']}): did not start: {row['error']}")
            continue
        tools = row["tools"]
        ctx.print(f"{row['server']} ({row['transport']}): {len(tools)} tools")
        width = max((len(t["name"]) for t in tools), default=0)
        for tool in tools:
            ctx.print(f"  {tool['name']:<{width}}  {tool['description']}".rstrip())
    return 1 if failed else 0
