"""``soulacy config validate``: the files, then what a run of each agent checks before it calls
the model — its provider, its tools and the MCP servers they come from — each problem at its
line, with a did-you-mean.

The tools are asked of every plugin as a run asks them (``soulacy_tools``), one plugin at a
time so that one plugin's error does not hide another's. Nothing is started or imported
beyond what a run imports (an agent's tool files): the MCP servers are not started, so a tool
of theirs is checked by its server's name (whether the server offers it is known once it
runs).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import (
    KEPT_SHOWN,
    CliContext,
    ConfigError,
    ConfigIssue,
    Location,
    UsageError,
)

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, Kernel, Tool


def _config_validate(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    summarized = len(kernel.config.kept) > KEPT_SHOWN  # ctx.kernel() said them in one line
    for warning in kernel.validate_all():  # the files first: raises every problem of them
        if warning not in kernel.config.warnings or (
            summarized and warning in map(str, kernel.config.kept)
        ):
            ctx.warn(warning)
    agents = kernel.agent_ids()
    issues, warnings = runnable_problems(kernel, agents)
    for warning in warnings:
        ctx.warn(warning)
    if issues:
        raise ConfigError(issues)
    ctx.print(f"ok: {kernel.config_file} and {len(agents)} agent file(s) are valid")
    return 0


def runnable_problems(
    kernel: Kernel, agent_ids: Sequence[str]
) -> tuple[list[ConfigIssue], list[str]]:
    """What would stop a run of each agent before its first model call (issues), and what
    would stop it but is meant for later or was said already (warnings: an agent that names no
    provider, a tool defined the original way that no plugin provides).

    Nothing is started: a plugin whose tools come from a service (the MCP servers) is asked
    with ``kernel.validating`` set, and offers what it can tell without starting it."""
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    kernel.validating = True
    try:
        _check_agents(kernel, agent_ids, issues, warnings)
    finally:
        kernel.validating = False
    return issues, warnings


def _check_agents(
    kernel: Kernel, agent_ids: Sequence[str], issues: list[ConfigIssue], warnings: list[str]
) -> None:
    workspace_provider: dict[str, list[str]] = {}  # an unknown llm.default.provider: its agents
    for agent_id in agent_ids:
        agent = kernel.agent(agent_id)
        found: list[ConfigIssue] = []
        problem = _provider_problem(kernel, agent, workspace_provider)
        if isinstance(problem, ConfigIssue):
            found.append(problem)
        elif problem is not None:
            warnings.append(problem)
        found.extend(_tool_problems(kernel, agent, warnings))
        if agent.section("enabled") is False:  # parked: said, but no run meets it
            warnings.extend(f"{issue} (agent {agent_id!r} is disabled)" for issue in found)
        else:
            issues.extend(found)
    for name, users in workspace_provider.items():
        where = kernel.config.source_of("llm.default.provider") or Location(str(kernel.config_file))
        of = ", ".join(repr(u) for u in users)
        used = f"; the provider of agent{'s' if len(users) > 1 else ''} {of}"
        issues.append(
            ConfigIssue(where, "llm.default.provider", _unknown_provider(kernel, name, used))
        )


def _provider_problem(
    kernel: Kernel, agent: AgentSpec, workspace_provider: dict[str, list[str]]
) -> ConfigIssue | str | None:
    """An issue for a provider name that names no provider; a warning when there is none."""
    llm = agent.section("llm")
    name = getattr(llm, "provider", None)
    own = name is not None
    if not own:
        try:
            name = kernel.config.section("llm.default").provider
        except KeyError:  # no loaded plugin declares llm.default: the run says what is missing
            return None
    if not name:
        return (
            f"agent {agent.id!r} names no llm.provider in {agent.file} and llm.default.provider"
            f" is not set in {kernel.config_file}: its runs fail until one is set"
        )
    try:
        kernel.providers.config(name)
    except UsageError:
        if not own:
            workspace_provider.setdefault(name, []).append(agent.id)
            return None
        where = agent.settings.source_of("llm.provider") or Location(str(agent.file))
        return ConfigIssue(where, "llm.provider", _unknown_provider(kernel, name))
    return None


def _unknown_provider(kernel: Kernel, name: str, note: str = "") -> str:
    try:
        kernel.providers.config(name)
    except UsageError as exc:
        message = str(exc)
    else:  # pragma: no cover - asked only for a name the registry refused
        return f"provider {name!r}"
    configured = kernel.config.values.get("llm.providers") or {}
    return message + note + _did_you_mean(name, [*configured, *kernel.provider_types()])


def _tool_problems(kernel: Kernel, agent: AgentSpec, warnings: list[str]) -> list[ConfigIssue]:
    """The problems of the agent's ``tools:`` entries, as the run's tool resolution
    (``Runner.tools_for``) would meet them, every plugin asked on its own. An entry the file's
    format keeps with no effect (a tool defined the original way: only its name is used) is a
    warning: it was said to be so, and the agent's runs fail until a plugin provides it."""
    issues: list[ConfigIssue] = []
    kept = {key.path for key in agent.settings.kept}
    contributed: dict[str, Tool] = {}
    refused: set[str] = set()  # the paths of entries a plugin has reported already
    for plugin, call in kernel.pm.plugin_callers("soulacy_tools"):
        try:
            for tools in call(kernel=kernel, agent_id=agent.id, agent=agent):
                for tool in tools or ():
                    contributed.setdefault(tool.listed_as or tool.name, tool)
        except ConfigError as exc:
            issues.extend(exc.issues)
            refused.update(issue.path for issue in exc.issues)
        except UsageError as exc:
            where = agent.settings.source_of("tools") or Location(str(agent.file))
            issues.append(ConfigIssue(where, "tools", f"{exc} (plugin {plugin!r})"))
    listed: list[Any] = agent.section("tools") or []
    for index, entry in enumerate(listed):
        path = f"tools.{index}"
        if entry in contributed or path in refused:
            continue
        where = agent.item_location("tools", index)
        if ":" in entry:
            message = (
                f"no loaded plugin loads {entry!r} ('file.py:function' tools are the builtin"
                " 'file_tools' plugin's; is it disabled?)"
            )
        else:
            named = sorted(n for n, t in contributed.items() if t.listed_as is None)
            message = (
                f"no loaded plugin provides a tool named {entry!r} (provided:"
                f" {', '.join(named) or 'none'}; or use 'file.py:function')"
                + _did_you_mean(entry, [*named, *_file_tools_of(kernel, agent)], by_function=True)
            )
        issue = ConfigIssue(where, path, message, entry, True)
        if path in kept:
            warnings.append(f"{issue}; its runs fail until a plugin provides it")
        else:
            issues.append(issue)
    return issues


def _file_tools_of(kernel: Kernel, agent: AgentSpec) -> list[str]:
    """``file.py:function`` names of the agent's folder, when the file_tools plugin loads
    such entries (read, not imported)."""
    if not kernel.pm.has_plugin("file_tools"):
        return []
    from soulacy.kernel import file_functions

    return file_functions(agent.file.parent)


def _did_you_mean(name: str, choices: Iterable[str], *, by_function: bool = False) -> str:
    """``; did you mean 'X'?`` for the closest choice. ``by_function``: a ``file.py:function``
    choice is also compared by its function's name (``check`` for ``tools.py:check``)."""
    options = sorted(set(choices))
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    if not close and by_function:
        functions = {option.rpartition(":")[2]: option for option in options if ":" in option}
        near = difflib.get_close_matches(name, sorted(functions), n=1, cutoff=0.6)
        close = [functions[near[0]]] if near else []
    return f"; did you mean {close[0]!r}?" if close else ""
