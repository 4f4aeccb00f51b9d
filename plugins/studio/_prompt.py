"""What the builder model is told: what a SOUL.yaml is, the keys and tools the loaded plugins
accept, that limits are not to be added, and for a retry, the last attempt and its problems."""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

import attrs

from soulacy.kernel import Duration, Kernel, Tool

from ._checks import check_name
from ._spec import LIMIT_PATHS, BuildSpec

_LIMITS = frozenset(LIMIT_PATHS)
_NAMES = {str: "text", int: "integer", float: "number", bool: "true/false"}


@attrs.frozen
class Previous:
    """The last rejected attempt: its file (or the reply when it did not parse) and problems."""

    number: int
    text: str
    errors: tuple[str, ...]


def system_prompt(kernel: Kernel, spec: BuildSpec) -> str:
    """What a SOUL.yaml is here: the keys and tools of the loaded plugins, and no limits."""
    keys = "\n".join(f"- {line}" for line in agent_keys(kernel))
    tools = ", ".join(
        f"{tool.name} ({tool.description})" if tool.description else tool.name
        for tool in contributed_tools(kernel, spec.id)
    )
    limits = ", ".join(".".join(p) for p in LIMIT_PATHS)
    return f"""\
You write agent definitions for Soulacy, a runtime for LLM agents. An agent is one YAML file,
agents/{spec.id}/SOUL.yaml. Reply with the complete file in a single ```yaml fenced block.

Keys of SOUL.yaml that the loaded plugins accept:
{keys}

Tools provided by plugins: {tools or "none"}. A tool may also be "file.py:function", a Python
function in a file beside SOUL.yaml. List in tools: only what the agent needs.

Do not write execution limits: a generated agent inherits the workspace's execution policy,
and the build removes them ({limits}).
Leave llm: out to use the workspace's default model."""


def user_prompt(
    spec: BuildSpec, current: str | None, problems: Sequence[str], previous: Previous | None
) -> str:
    """The goal and what the person stated; for a repair the current file and its problems;
    for a retry the last attempt and why it was rejected."""
    parts = [f"Goal: {spec.goal.strip()}", f"Agent id: {spec.id}"]
    stated = {"name": spec.name, "description": spec.description}
    parts += [f"{key.capitalize()}: {value}" for key, value in stated.items() if value]
    if spec.tools is not None:
        parts.append(f"Tools (set by the build): {', '.join(spec.tools) or 'none'}")
    if spec.llm:
        parts.append(f"llm (set by the build): {_inline(spec.llm)}")
    if spec.limits or "max_tokens" in spec.llm:
        asked = ", ".join(f"{'.'.join(p)}: {v}" for p, v in spec.asked_limits().items())
        parts.append(f"Limits the person asked for (set by the build): {asked}")
    if current is not None:
        parts.append(
            "The agent exists. Its current SOUL.yaml (change what the goal needs, keep the"
            f" rest):\n```yaml\n{current.rstrip()}\n```"
        )
        if problems:
            parts.append("Its problems now:\n" + "\n".join(f"- {p}" for p in problems))
    if spec.checks:
        lines = [
            f"- {check_name(c, n)}: input {c.input!r}"
            + "".join(f"; {e.target} {e.op} {e.value!r}" for e in c.expect)
            for n, c in enumerate(spec.checks)
        ]
        parts.append("Checks the agent must pass (each runs it on the input):\n" + "\n".join(lines))
    if previous is not None:
        problems = "\n".join(f"- {error}" for error in previous.errors)
        parts.append(
            f"Attempt {previous.number} was rejected. As it would have been saved:\n"
            f"```yaml\n{previous.text.rstrip()}\n```\nProblems:\n{problems}\n"
            "Reply with the complete corrected file."
        )
    return "\n\n".join(parts)


def agent_keys(kernel: Kernel) -> list[str]:
    """One line per SOUL.yaml key of the loaded plugins, limits left out."""
    lines = []
    for owned in kernel.sections:
        section = owned.section
        if section.scope != "agent" or not section.owns or (section.key,) in _LIMITS:
            continue
        doc = f" — {section.doc}" if section.doc else ""
        lines.append(f"{section.key}: {_describe(section.key, section.type)}{doc}")
    return lines


def contributed_tools(kernel: Kernel, agent_id: str) -> list[Tool]:
    found: dict[str, Tool] = {}
    for tools in kernel.hook.soulacy_tools(kernel=kernel, agent_id=agent_id, agent=None):
        for tool in tools or ():
            found.setdefault(tool.name, tool)
    return [found[name] for name in sorted(found)]


def _describe(key: str, tp: Any) -> str:
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(options) == 1:
        tp = options[0]
    if isinstance(tp, type) and attrs.has(tp):
        fields = [f.name for f in attrs.fields(tp) if (key, f.name) not in _LIMITS]
        return "mapping with keys " + ", ".join(fields)
    if typing.get_origin(tp) in (list, Sequence) and typing.get_args(tp):
        return "list of " + _describe(key, typing.get_args(tp)[0])
    if tp is Duration:
        return 'duration such as "30s", "2m"'
    return _NAMES.get(tp, getattr(tp, "__name__", str(tp)))


def _inline(mapping: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in mapping.items()) + "}"
