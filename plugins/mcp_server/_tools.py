"""The workspace's agents as MCP tools, served by the SDK's low-level ``Server``: one tool per
agent, named by its id; a call is one run of that agent on the ``text`` argument.

Both transports build their server here; they differ only in who the caller is (``principal``:
the HTTP request's principal, or the stdio server's). Importing this module imports the SDK
(seconds): it is imported in a worker thread, on first use (decision 0033).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from soulacy.kernel import (
    AgentSpec,
    CapacityError,
    ConfigError,
    Kernel,
    RunIdInUse,
    RunResult,
    UsageError,
)

logger = logging.getLogger("soulacy.mcp_server")

# The names MCP clients accept for a tool (SEP-986): an agent whose id is not one is not offered.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
# A conversation's id, as the HTTP API's ``session_id``.
SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")
INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "description": "the request to the agent"},
        "session_id": {
            "type": "string",
            "description": (
                "continue this conversation (the session_id of an earlier call's result"
                " _meta); a new conversation when omitted"
            ),
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}

# Who a request's caller is: a principal, or None (the command line's runs have none).
PrincipalOf = Callable[[ServerRequestContext[Any]], "str | None"]


def usable_agents(kernel: Kernel, principal: str | None) -> list[AgentSpec]:
    """The agents ``principal`` may call: every valid, enabled agent of the workspace whose id
    is a tool name. ``principal`` changes nothing: agents are the workspace's, not a
    principal's (the HTTP API's ``GET /agents`` lists them all to every key); what is a
    principal's is its runs and conversations, and a call's run is stored under its caller."""
    found = []
    for agent_id in kernel.agent_ids():
        if not TOOL_NAME.fullmatch(agent_id):
            logger.debug("agent %r is not offered as an MCP tool: its id is no tool name", agent_id)
            continue
        try:
            agent = kernel.agent(agent_id)
        except (UsageError, ConfigError):
            continue  # an invalid SOUL.yaml: `soulacy config validate` says why
        if agent.section("enabled") is not False:
            found.append(agent)
    return found


def describe(agent: AgentSpec) -> types.Tool:
    name = agent.section("name")
    description = agent.section("description") or (
        f"The agent {name or agent.id!r} of a Soulacy workspace: send it a request as `text`."
    )
    return types.Tool(
        name=agent.id,
        title=name or None,
        description=description,
        input_schema=dict(INPUT_SCHEMA),
    )


def tool_error(text: str, meta: Mapping[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)],
        is_error=True,
        _meta=dict(meta) if meta is not None else None,
    )


def answer(result: RunResult) -> types.CallToolResult:
    """A completed run answers its reply; any other end is a tool error saying how it ended.
    Either way ``_meta`` is the run's reply metadata (``run_id``, ``session_id``, ``status`` …),
    as the HTTP API's ``metadata``."""
    meta = result.metadata()
    if result.status == "completed":
        return types.CallToolResult(content=[types.TextContent(text=result.reply)], _meta=meta)
    reason = result.incomplete_reason or result.error or "no reason given"
    text = f"run {result.run_id} of agent {result.agent_id!r} ended {result.status}: {reason}"
    if result.reply:
        text += f"\n\n{result.reply}"
    return tool_error(text, meta)


async def call_agent(
    kernel: Kernel, principal: str | None, name: str, arguments: Mapping[str, Any] | None
) -> types.CallToolResult:
    """Run the agent ``name`` on the call's ``text`` (in ``session_id``, when given)."""
    agents = {agent.id: agent for agent in usable_agents(kernel, principal)}
    if name not in agents:  # finding the tool failed: a protocol error, not a tool's
        raise MCPError(INVALID_PARAMS, f"unknown tool {name!r}: expected one of {sorted(agents)}")
    arguments = dict(arguments or {})
    text = arguments.pop("text", None)
    session_id = arguments.pop("session_id", None)
    if not isinstance(text, str) or not text.strip():
        return tool_error("expected the argument text: the request to the agent, a string")
    if session_id is not None and (
        not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id)
    ):
        return tool_error("expected session_id to be 1-200 letters, digits and ._:@-")
    if arguments:
        return tool_error(f"unexpected arguments: {', '.join(sorted(arguments))}")
    if kernel.stopping.is_set():
        return tool_error("the server is shutting down: it takes no new run; retry later")
    try:
        result = await kernel.run(name, text, session_id=session_id, principal=principal)
    except CapacityError as exc:
        return tool_error(f"the server is at capacity, retry later: {exc}")
    except (RunIdInUse, UsageError, ConfigError) as exc:
        return tool_error(str(exc))
    return answer(result)


def soulacy_version() -> str:
    try:
        return version("soulacy")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return ""


def agents_server(kernel: Kernel, principal_of: PrincipalOf) -> Server[Any]:
    """An MCP server whose tools are ``kernel``'s agents, each call a run as the caller."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal = principal_of(ctx)
        return types.ListToolsResult(tools=[describe(a) for a in usable_agents(kernel, principal)])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        return await call_agent(kernel, principal_of(ctx), params.name, params.arguments)

    return Server(
        "soulacy",
        version=soulacy_version(),
        instructions=(
            "Each tool is an agent of a Soulacy workspace: calling it runs the agent on `text`"
            " and answers its reply; the result's _meta carries the run's id and session_id."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
