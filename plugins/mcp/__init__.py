"""The builtin MCP plugin: agents use the tools of MCP servers.

config.yaml::

    mcp:
      servers:
        docs:                                  # the server's id: its tools are docs__<tool>
          command: python                      # stdio: the SDK starts the process
          args: [docs_server.py]
          env: {DOCS_ROOT: /srv/docs}
        search:
          url: https://search.example.com/mcp  # streamable HTTP
          headers: {Authorization: "Bearer …"} # secrets: redacted wherever shown

SOUL.yaml::

    mcp_servers: [docs]                  # the servers this agent may use
    mcp_tools: [docs__search]            # optional: only these of their tools
    tools: [docs__search]                # the allow-list of every tool (decision 0012)

Servers run in the kernel's service ``mcp`` (``soulacy serve``, ``open_kernel``): started with
it, restarted with backoff when they exit or stop answering, stopped on shutdown. A server an
agent lists that fails to start fails the kernel's start, naming it; one no agent lists is only
a warning. ``soulacy run AGENT`` starts only the servers AGENT lists (``kernel.agents_to_run``);
``config validate`` starts none, and checks the agents' MCP tools by their servers' names.
MCP tools are ordinary tools: call ids, replay, progress detection, the run's tool timeout,
``soulacy_tool_permission`` and proof receipts apply to them as to any other. The
``mcp`` package (``pip install 'soulacy[mcp]'``) is imported only when a server is configured.
See docs/mcp.md and decision 0033.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

# Light names only: the launcher imports this module to list `soulacy --help` (the command
# `mcp tools`, decision 0036), which imports neither attrs nor the configuration's machinery.
from soulacy.kernel import (
    CliCommand,
    ConfigIssue,
    Location,
    StashKey,
    UsageError,
    hookimpl,
    lazy_exports,
)

if TYPE_CHECKING:  # the service and the kernel import trio: registering does not (decision 0038)
    from soulacy.kernel import AgentSpec, ConfigSection, Effects, Kernel, Service, Settings, Tool

    from ._model import McpConfig, McpServer, tool_name
    from ._service import (
        McpCallError,
        McpServerLost,
        McpService,
        McpStartError,
        McpToolError,
        ServerConnection,
        Statistics,
    )

__all__ = [
    "McpCallError",
    "McpConfig",
    "McpServer",
    "McpServerLost",
    "McpService",
    "McpStartError",
    "McpToolError",
    "Statistics",
    "service_of",
    "tool_name",
]
# The service's names, imported on first use (PEP 562).
_FROM_SERVICE = frozenset(
    {"McpCallError", "McpServerLost", "McpService", "McpStartError", "McpToolError", "Statistics"}
)
_FROM_MODEL = frozenset({"McpConfig", "McpServer", "tool_name"})  # attrs: on first use too


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(
        __name__,
        {
            **{name: "._service" for name in _FROM_SERVICE},
            **{name: "._model" for name in _FROM_MODEL},
        },
    )


logger = logging.getLogger("soulacy.mcp")
_service_key = StashKey["McpService"]("mcp")


def service_of(kernel: Kernel) -> McpService | None:
    """The kernel's MCP service, once ``soulacy_services`` made it (None without servers)."""
    return kernel.stash.get(_service_key, None)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    # Declared by name (decision 0036): `soulacy --help` imports neither the SDK nor trio.
    return [
        CliCommand(
            "mcp tools",
            "the tools each configured MCP server offers (each server started once and asked)",
            "soulacy.plugins.mcp._cli:list_tools",
            "soulacy.plugins.mcp._cli:configure",
            read_only=True,
        )
    ]


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._model import McpConfig

    return [
        ConfigSection("mcp", McpConfig, doc="MCP servers whose tools agents may use"),
        # A server is a command the kernel runs (with its environment and folder) or a URL it
        # sends headers to: the trust root, set in config.yaml only (docs/security.md).
        ConfigSection.trust_root("mcp", doc="commands the server runs and where they connect"),
        ConfigSection(
            "mcp_servers", list[str], scope="agent", default=list, doc="MCP servers it may use"
        ),
        ConfigSection(
            "mcp_tools", list[str] | None, scope="agent", doc="only these tools of its servers"
        ),
    ]


def _where(settings: Settings, *paths: str) -> Location:
    for path in paths:
        found = settings.source_of(path)
        if found is not None:
            return found
    return Location(str(settings.file))


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    import attrs

    from ._model import MAX_SERVER_ID, SEPARATOR, SERVER_ID, McpServer

    mcp: McpConfig = config.section("mcp")
    issues: list[ConfigIssue] = []

    def issue(sid: str, key: str, message: str, value: Any = None, has: bool = False) -> None:
        path = f"mcp.servers.{sid}" + (f".{key}" if key else "")
        # the key itself, else the first key of the entry that is set (it names the entry)
        fields = [f"mcp.servers.{sid}.{f.name}" for f in attrs.fields(McpServer)]
        loc = _where(config, path, f"mcp.servers.{sid}", *fields, "mcp.servers", "mcp")
        issues.append(ConfigIssue(loc, path, message, value, has))

    for sid, server in mcp.servers.items():
        if not SERVER_ID.match(sid) or len(sid) > MAX_SERVER_ID:
            issue(
                sid,
                "",
                f"expected a server id of letters, digits, '-' and single '_' (at most"
                f" {MAX_SERVER_ID} characters): its tools are named <id>{SEPARATOR}<tool>",
                sid,
                True,
            )
        kind = server.kind
        if kind == "stdio":
            if not server.command:
                issue(sid, "command", "expected the command that starts a stdio server")
            for key in ("url", "headers"):
                if getattr(server, key):
                    issue(sid, key, f"expected no {key} for a stdio server (transport: stdio)")
        else:
            url = server.url or ""
            if not url.startswith(("http://", "https://")):
                # a URL may carry credentials: it is never echoed back
                issue(
                    sid, "url", "expected the http:// or https:// URL of a streamable HTTP server"
                )
            for key in ("command", "args", "env", "cwd"):
                if getattr(server, key):
                    issue(sid, key, f"expected no {key} for an HTTP server (transport: http)")
        if not server.backoff:
            issue(sid, "backoff", "expected at least one duration")
        if server.startup_timeout.seconds <= 0:
            issue(sid, "startup_timeout", "expected a duration above 0")
    enabled = [sid for sid, s in mcp.servers.items() if s.enabled]
    if enabled and importlib.util.find_spec("mcp") is None:
        loc = _where(config, "mcp.servers", "mcp")
        issues.append(
            ConfigIssue(
                loc,
                "mcp.servers",
                "the MCP SDK is not installed: pip install 'soulacy[mcp]'",
            )
        )
    return issues


def _servers(kernel: Kernel) -> Mapping[str, McpServer]:
    mcp: McpConfig = kernel.config.section("mcp")
    return mcp.servers


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    from ._model import SEPARATOR, server_of

    servers = _servers(kernel)
    listed: list[str] = agent.section("mcp_servers") or []
    settings = agent.settings
    issues: list[ConfigIssue] = []
    configured = ", ".join(sorted(servers)) or "none"
    for index, sid in enumerate(listed):
        loc = _where(settings, f"mcp_servers.{index}", "mcp_servers")
        if sid not in servers:
            message = (
                f"unknown MCP server {sid!r}: expected one of the servers of config.yaml"
                f" mcp.servers ({configured}){_did_you_mean(sid, servers)}"
            )
            issues.append(ConfigIssue(loc, "mcp_servers", message, sid, True))
        elif not servers[sid].enabled:
            message = f"MCP server {sid!r} is disabled in config.yaml (mcp.servers.{sid}.enabled)"
            issues.append(ConfigIssue(loc, "mcp_servers", message, sid, True))
    for index, name in enumerate(agent.section("mcp_tools") or []):
        server = server_of(name)
        if server not in listed:
            loc = _where(settings, f"mcp_tools.{index}", "mcp_tools")
            message = (
                f"expected <server>{SEPARATOR}<tool> with a server of mcp_servers"
                f" ({', '.join(listed) or 'none listed'})"
            )
            issues.append(ConfigIssue(loc, "mcp_tools", message, name, True))
    for index, name in enumerate(agent.section("tools") or []):
        server = server_of(name) if isinstance(name, str) else None
        if server in servers and server not in listed:
            loc = _where(settings, f"tools.{index}", "tools")
            message = (
                f"a tool of MCP server {server!r}, which mcp_servers does not list:"
                f" expected {server!r} in mcp_servers"
            )
            issues.append(ConfigIssue(loc, "tools", message, name, True))
    return issues


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _needed(kernel: Kernel, agent_ids: Iterable[str] | None = None) -> set[str]:
    """The servers some enabled agent (of ``agent_ids``; None: of all) lists in mcp_servers."""
    needed: set[str] = set()
    for agent_id in kernel.agent_ids() if agent_ids is None else agent_ids:
        try:
            agent = kernel.agent(agent_id)
        except UsageError:
            continue  # an invalid agent is reported when it is used
        if agent.section("enabled") is not False:
            needed.update(agent.section("mcp_servers") or ())
    return needed


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    servers = {sid: s for sid, s in _servers(kernel).items() if s.enabled}
    if not servers:
        return []
    service = service_of(kernel)
    if service is None:  # asked again (to name the services): the same one
        from ._service import McpService

        # `soulacy run AGENT`: the servers AGENT lists, and no other: another agent's server
        # neither slows nor stops the run.
        only = kernel.agents_to_run
        needed = _needed(kernel, only)
        if only is not None:
            servers = {sid: s for sid, s in servers.items() if sid in needed}
            if not servers:
                return []
        service = kernel.stash[_service_key] = McpService(kernel, servers, needed)
    return [service]


@hookimpl
def soulacy_tools(kernel: Kernel, agent: AgentSpec | None) -> Sequence[Tool]:

    if agent is not None and kernel.validating:
        return _unstarted_tools(agent)
    service = service_of(kernel)
    if agent is None:
        listed = list(service.connections) if service else []
        chosen: set[str] | None = None
    else:
        listed = agent.section("mcp_servers") or []
        tools = agent.section("mcp_tools")
        chosen = set(tools) if tools is not None else None
    offered: list[Tool] = []
    for sid in listed:
        conn = service.connections.get(sid) if service else None
        if service is not None and conn is not None and conn.tools is not None:
            offered.extend(_tools_of(service, conn, chosen))
        elif agent is not None:  # its tools are chosen by mcp_servers: none is an error
            state = f"{conn.state}: {conn.last_error}" if conn else "no service runs it"
            raise UsageError(
                f"{agent.file}: mcp_servers: MCP server {sid!r} is not running ({state});"
                " MCP servers run as the kernel's service 'mcp' (soulacy serve, open_kernel)"
            )
    return offered


def _unstarted_tools(agent: AgentSpec) -> list[Tool]:
    """For ``config validate``, which starts no server: a stand-in for each tool the agent
    names (in ``tools:`` or ``mcp_tools``) of a server it lists. Whether the server really
    offers it is known once it runs (``soulacy mcp tools``)."""
    from soulacy.kernel import Tool

    from ._model import server_of

    listed = set(agent.section("mcp_servers") or ())
    named = [*(agent.section("tools") or ()), *(agent.section("mcp_tools") or ())]

    def unchecked(**arguments: Any) -> str:  # pragma: no cover - never called
        raise UsageError("a stand-in of config validate")

    return [
        Tool(name, f"a tool of MCP server {server_of(name)!r}", {}, unchecked)
        for name in dict.fromkeys(n for n in named if isinstance(n, str))
        if server_of(name) in listed
    ]


def _tools_of(service: McpService, conn: ServerConnection, chosen: set[str] | None) -> list[Tool]:
    from soulacy.kernel import Tool

    from ._model import tool_name

    tools: list[Tool] = []
    seen: set[str] = set()
    for remote in conn.tools or ():
        name = tool_name(conn.id, remote.name)
        if chosen is not None and name not in chosen:
            continue
        if name in seen:
            logger.warning(
                "mcp server %r: tool %r is named %r like another of its tools; only the first"
                " is offered",
                conn.id,
                remote.name,
                name,
            )
            continue
        seen.add(name)
        tools.append(
            Tool(
                name=name,
                description=remote.description or f"{remote.name} (MCP server {conn.id})",
                parameters=remote.input_schema,
                function=_caller(service, conn.id, remote.name),
                chosen=True,  # by the agent's mcp_servers (and mcp_tools), no tools: entry
                effects=_effects(remote.annotations),
            )
        )
    return tools


def _effects(annotations: Any) -> Effects:
    """The server's hints, as the effect ledger reads them: a tool that hints neither is
    ``unsafe`` (the MCP specification's defaults: not read-only, not idempotent)."""
    if annotations is None:
        return "unsafe"
    if annotations.read_only_hint:
        return "read"
    return "idempotent" if annotations.idempotent_hint else "unsafe"


def _caller(service: McpService, server_id: str, remote: str) -> Any:
    async def call(**arguments: Any) -> str:
        # Looked up at call time: a restart (or a new start of the kernel) replaces it.
        return await service.connections[server_id].call(remote, arguments)

    call.__name__ = f"mcp_{server_id}_{remote}"
    return call
