"""The builtin file tools: ``file.py:function`` entries of an agent's ``tools:`` list.

SOUL.yaml::

    tools:
      - read                  # a tool some plugin contributes by name
      - tools.py:search       # the function ``search`` of agents/<id>/tools.py

The file is imported when a run first needs it, and again once it has changed (so an edit
takes effect at the next run, under ``soulacy serve`` too); the function's signature gives the
schema and its docstring the description. A file or function that does not exist is an error
at its line of SOUL.yaml, with a did-you-mean; ``soulacy config validate`` reports them all.
The kernel gets these tools through ``soulacy_tools`` like any plugin's; blocked
(``-p no:file_tools``), a ``file.py:function`` entry is an unknown tool.

An entry is code the server runs, so ``tools:`` is part of the trust root: this plugin declares
it (``ConfigSection.trust_root`` with a check). Written in SOUL.yaml by hand, an entry may name
any file. Changed over HTTP (the agent editor), a new entry must name a registered tool (one a
plugin contributes, an MCP server's included) or a ``.py`` file inside the agent's folder,
resolved (no absolute path, no ``..``, no symlink out of it), and a public function name;
entries the file already lists stay as they are.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from stat import S_ISREG
from types import ModuleType
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import ConfigSection, Tool, UsageError, hookimpl

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec, Kernel

__all__ = ["load_file_tool", "remote_tool_entries"]

TRUST_DOC = "which code the agent's tools run"


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection.trust_root("tools", "agent", doc=TRUST_DOC, allow=remote_tool_entries)]


def remote_tool_entries(
    kernel: Kernel, agent_id: str | None, value: Any, saved: Any
) -> Mapping[str, str]:
    """The entries of a new ``tools:`` list an editor outside the trust root may not write (by
    index, with the reason): entries the file lists already are kept; a new one names a
    registered tool, or a ``file.py:function`` inside the agent's folder."""
    from soulacy.kernel import AGENTS_DIR

    if not isinstance(value, list) or agent_id is None:
        return {}  # a removal, or a value the type check refuses itself
    kept = (
        {entry for entry in saved if isinstance(entry, str)} if isinstance(saved, list) else set()
    )
    folder = kernel.workspace / AGENTS_DIR / agent_id
    registered: set[str] | None = None
    refused: dict[str, str] = {}
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or entry in kept:
            continue
        if ":" in entry:
            reason = _outside(entry, folder, agent_id)
        else:
            if registered is None:
                registered = _registered(kernel, agent_id)
            reason = None
            if entry not in registered:
                known = ", ".join(sorted(registered)) or "none"
                reason = (
                    f"no loaded plugin or MCP server provides a tool named {entry!r}"
                    f" (registered: {known}); over HTTP an agent's tools are registered tools"
                    f" and file.py:function files in the agent's folder"
                )
        if reason is not None:
            refused[str(index)] = reason
    return refused


def _registered(kernel: Kernel, agent_id: str) -> set[str]:
    names: set[str] = set()
    for tools in kernel.hook.soulacy_tools(kernel=kernel, agent_id=agent_id, agent=None):
        names.update(tool.listed_as or tool.name for tool in tools or ())
    return names


def _outside(entry: str, folder: Path, agent_id: str) -> str | None:
    """Why ``file.py:function`` is not a file tool of the agent's folder, or None."""
    file_part, _, function_name = entry.partition(":")
    where = f"the agent's folder ({folder.parent.name}/{agent_id}/)"
    rule = (
        f"over HTTP a tool file must be a .py file in {where}; other files are the trust"
        " root: name them in SOUL.yaml by hand"
    )
    relative = PurePath(file_part)
    if relative.is_absolute() or ".." in relative.parts or not file_part:
        return f"{entry!r}: {rule}"
    if relative.suffix != ".py":
        return f"{entry!r}: not a .py file; {rule}"
    if not function_name.isidentifier() or function_name.startswith("_"):
        return f"{entry!r}: expected the name of a public function after ':'"
    try:
        root = folder.resolve(strict=True)
        path = (folder / relative).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return f"{entry!r}: no such file in {where}"
    if not path.is_relative_to(root):
        return f"{entry!r}: resolves outside {where} (a symlink); {rule}"
    if path.suffix != ".py":
        return f"{entry!r}: a link to a file that is not a .py file; {rule}"
    if not path.is_file():
        return f"{entry!r}: not a file in {where}"
    return None


@hookimpl
def soulacy_tools(agent: AgentSpec | None) -> Sequence[Tool]:
    if agent is None:  # no agent file to read references from
        return []
    from soulacy.kernel import ConfigError, ConfigIssue

    listed: list[str] = agent.section("tools") or []
    tools: list[Tool] = []
    issues: list[ConfigIssue] = []
    for index, entry in enumerate(listed):
        if not isinstance(entry, str) or ":" not in entry:
            continue
        try:
            tools.append(load_file_tool(entry, agent.file.parent))
        except UsageError as exc:  # every entry's problem together, each at its line
            where = agent.item_location("tools", index)
            issues.append(ConfigIssue(where, f"tools.{index}", str(exc)))
    if issues:
        raise ConfigError(issues)
    return tools


# The modules of tool files, by resolved path, with the (mtime, size) they were imported at and
# the tools made from them (by reference): a file changed since (edited under `soulacy serve`)
# is imported again by the next run, and its tools made again.
_modules: dict[Path, tuple[tuple[int, int], ModuleType, dict[str, Tool]]] = {}


def load_file_tool(reference: str, base: Path) -> Tool:
    """Load ``"file.py:function"`` (relative to ``base``, the agent's folder) as a tool.

    The file is imported once, and again when it has changed since (its modification time or
    size); the tool is made once per import (every run of a served agent asks for it). A file or
    function that does not exist is a UsageError with a did-you-mean."""
    file_part, _, function_name = reference.partition(":")
    path = (base / file_part).resolve()
    try:
        stat = path.stat()
    except OSError:
        stat = None
    if not function_name or stat is None or not S_ISREG(stat.st_mode):
        raise UsageError(
            f"tool {reference!r}: expected 'file.py:function' naming a file that exists"
            f" (looked for {path}){_did_you_mean(f'{file_part}:{function_name}', base)}"
        )
    stamp = (stat.st_mtime_ns, stat.st_size)
    known = _modules.get(path)
    if known is not None and known[0] == stamp:
        module, made = known[1], known[2]
        tool = made.get(reference)
        if tool is not None:
            return tool
    else:
        module, made = _import(reference, path), {}
        _modules[path] = (stamp, module, made)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UsageError(
            f"tool {reference!r}: {path} has no function {function_name!r}"
            + _suggestion(function_name, _public_functions(module))
        )
    tool = made[reference] = attrs.evolve(Tool.from_function(function), listed_as=reference)
    return tool


def _import(reference: str, path: Path) -> ModuleType:
    # A name of its own per file (and per import of it): sys.modules holds the latest.
    module_name = f"soulacy_agent_tools_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"tool {reference!r}: {path} failed to import: {exc}") from exc
    sys.modules[module_name] = module
    return module


def _public_functions(module: ModuleType) -> list[str]:
    import inspect

    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


def _did_you_mean(entry: str, base: Path) -> str:
    from soulacy.kernel import file_functions

    return _suggestion(entry, file_functions(base))


def _suggestion(name: str, choices: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
