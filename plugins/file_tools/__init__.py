"""The builtin file tools: ``file.py:function`` entries of an agent's ``tools:`` list.

SOUL.yaml::

    tools:
      - read                  # a tool some plugin contributes by name
      - tools.py:search       # the function ``search`` of agents/<id>/tools.py

The file is imported once per process; the function's signature gives the schema and its
docstring the description. The kernel gets these tools through ``soulacy_tools`` like any
plugin's; blocked (``-p no:file_tools``), a ``file.py:function`` entry is an unknown tool.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from soulacy.kernel import Tool, UsageError, hookimpl

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec

__all__ = ["load_file_tool"]


@hookimpl
def soulacy_tools(agent: AgentSpec | None) -> Sequence[Tool]:
    if agent is None:  # no agent file to read references from
        return []
    listed: list[str] = agent.section("tools") or []
    return [load_file_tool(entry, agent.file.parent) for entry in listed if ":" in entry]


def load_file_tool(reference: str, base: Path) -> Tool:
    """Load ``"file.py:function"`` (relative to ``base``, the agent's folder) as a tool."""
    file_part, _, function_name = reference.partition(":")
    path = (base / file_part).resolve()
    if not function_name or not path.is_file():
        raise UsageError(
            f"tool {reference!r}: expected 'file.py:function' naming a file that exists"
            f" (looked for {path})"
        )
    module_name = f"soulacy_agent_tools_{abs(hash(str(path)))}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise UsageError(f"tool {reference!r}: {path} failed to import: {exc}") from exc
        sys.modules[module_name] = module
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UsageError(f"tool {reference!r}: {path} has no function {function_name!r}")
    return attrs.evolve(Tool.from_function(function), listed_as=reference)
