"""``config validate`` of ``confirm_tools``: each entry names a tool of the agent, as its calls
do (a listing such as ``tools.py:delete`` matches no call, so nothing would wait)."""

from __future__ import annotations

import difflib

from soulacy.kernel import AgentSpec, ConfigIssue, Kernel, SoulacyError


def confirm_tools_issues(kernel: Kernel, agent: AgentSpec) -> list[ConfigIssue]:
    listed: list[str] = agent.section("confirm_tools") or []
    if not listed:
        return []
    try:
        names = {tool.name for tool in kernel.runner().tools_for(agent)}
    except SoulacyError:
        return []  # the agent's tools have problems of their own, reported with their key
    # Tools of MCP servers and remote agents are known once they are reached: not here.
    unknowable = bool(agent.section("mcp_servers") or agent.section("a2a_agents"))
    issues = []
    for index, name in enumerate(listed):
        if name in names or (unknowable and ":" not in name):
            continue
        offered = ", ".join(sorted(names)) or "none"
        near = difflib.get_close_matches(name.rpartition(":")[2], sorted(names), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        issues.append(
            ConfigIssue(
                agent.item_location("confirm_tools", index),
                f"confirm_tools[{index}]",
                f"expected the name of one of the agent's tools (its calls wait for approval),"
                f" got {name!r}; its tools: {offered}{hint}",
            )
        )
    return issues
