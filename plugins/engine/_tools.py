"""The tools a run of an agent is offered: those its SOUL.yaml lists under ``tools`` (the
builtin ``core`` plugin's key), by name or as ``file.py:function`` (the builtin
``file_tools`` plugin's), every one contributed through ``soulacy_tools``; then those a plugin
offers as ``chosen`` by the agent's other keys (``mcp_servers``).

Run assembly, so the runner's (``Runner.tools_for``; the kernel's until decision 0083):
``config validate`` and studio ask it what a run would be offered before any run does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel import UsageError

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, Kernel, Tool


def tools_for(kernel: Kernel, agent: AgentSpec) -> list[Tool]:
    """The agent's tools: its listed ones in its order, then the chosen ones."""
    listed: list[str] = agent.section("tools") or []
    contributed: dict[str, Tool] = {}
    for tools in kernel.hook.soulacy_tools(kernel=kernel, agent_id=agent.id, agent=agent):
        for tool in tools or ():
            contributed.setdefault(tool.listed_as or tool.name, tool)
    chosen = _listed_tools(agent, listed, contributed)
    names = {tool.name for tool in chosen}
    for tool in contributed.values():
        if tool.chosen and tool.name not in names:
            chosen.append(tool)
            names.add(tool.name)
    return chosen


def _listed_tools(agent: AgentSpec, listed: list[str], contributed: dict[str, Tool]) -> list[Tool]:
    chosen = []
    for entry in listed:
        if entry in contributed:
            chosen.append(contributed[entry])
        elif ":" in entry:
            raise UsageError(
                f"{agent.file}: tools: no loaded plugin loads {entry!r} ('file.py:function'"
                " tools are the builtin 'file_tools' plugin's; is it disabled?)"
            )
        else:
            named = sorted(n for n, t in contributed.items() if t.listed_as is None)
            raise UsageError(
                f"{agent.file}: tools: no loaded plugin provides a tool named"
                f" {entry!r} (provided: {', '.join(named) or 'none'};"
                " or use 'file.py:function')"
            )
    return chosen
