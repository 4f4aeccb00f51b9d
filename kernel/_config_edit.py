"""Editing a round-trip YAML document in place: only what changed is touched; and what an
editor outside the trust root may not change (:func:`trust_root_changes`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString

from ._config import ConfigSection, OwnedSection, Scope, _matches, _pattern


def _expand(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``{"runtime.default_max_turns": 3}`` -> ``{"runtime": {"default_max_turns": 3}}``."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        node = out
        *parents, last = str(key).split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if isinstance(value, Mapping) and isinstance(node.get(last), dict):
            node[last].update(_expand(value))
        else:
            node[last] = _expand(value) if isinstance(value, Mapping) else value
    return out


def apply_changes(
    doc: CommentedMap,
    changes: Mapping[str, Any],
    aliases: Mapping[str, str] | None = None,
    *,
    null_removes: bool = False,
) -> list[str]:
    """Merge ``changes`` into ``doc`` and return the dotted keys whose values changed.

    Mappings merge member by member (a section's other saved keys stay); any other value
    replaces what was there. A value equal to the saved one is not a change. ``aliases`` maps
    old dotted names to new ones (``Settings.aliases``): a change of a new name that the file
    writes under its old name only is made to the old name's line, in place.

    With ``null_removes`` (the agent editor's ``PATCH``), ``None`` removes its key instead of
    writing a null: the key inherits again. A section that is absent is not created to remove
    members from, and a section whose members the changes all removed goes too (it says
    nothing, as when absent); a section the changes only partly touch always stays.
    """
    changed: list[str] = []
    if aliases:
        changes = {_saved_name(doc, str(key), aliases): v for key, v in changes.items()}

    def merge(node: CommentedMap, updates: Mapping[str, Any], prefix: str) -> None:
        for key, value in updates.items():
            path = f"{prefix}{key}"
            if value is None and null_removes:
                if key in node:
                    del node[key]
                    changed.append(path)
            elif isinstance(value, Mapping):
                child = node.get(key)
                if not isinstance(child, CommentedMap):
                    if null_removes and not _writes(value):
                        continue  # nothing to remove from a section that is not there
                    child = CommentedMap()
                    if key in node and node[key] is not None:
                        changed.append(path)
                    node[key] = child
                before = len(changed)
                merge(child, value, path + ".")
                if null_removes and not child and len(changed) > before:
                    del node[key]  # emptied by removals: it says nothing, as when absent
            elif key not in node or _differs(node[key], value):
                node[key] = _keep_style(node.get(key), value)
                changed.append(path)

    merge(doc, _expand(changes), "")
    return changed


def _has(doc: Mapping[str, Any], dotted: str) -> bool:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _saved_name(doc: CommentedMap, key: str, aliases: Mapping[str, str]) -> str:
    for old, new in aliases.items():
        if key == new and _has(doc, old) and not _has(doc, new):
            return old
    return key


def _differs(old: Any, new: Any) -> bool:
    return bool(old != new or isinstance(old, bool) != isinstance(new, bool))


def _writes(value: Mapping[str, Any]) -> bool:
    """Whether a change holds a value to write (not only removals)."""
    return any(v is not None and (not isinstance(v, Mapping) or _writes(v)) for v in value.values())


# Unicode line breaks YAML folds in plain and single-quoted scalars: written escaped instead.
_LINE_BREAKS = re.compile("[\x85\u2028\u2029]")


def _keep_style(old: Any, new: Any) -> Any:
    """A quoted string stays quoted the same way when its value changes; a flow list stays a
    flow list. A string holding a Unicode line break is double-quoted (escaped), since YAML
    would fold it in a plain or single-quoted scalar: the file would say something else."""
    if isinstance(new, str) and _LINE_BREAKS.search(new):
        return DoubleQuotedScalarString(new)
    if isinstance(old, ScalarString) and isinstance(new, str):
        return type(old)(new)
    if isinstance(new, list):
        seq = CommentedSeq([_keep_style(None, item) for item in new])
        if isinstance(old, CommentedSeq) and old.fa.flow_style():
            seq.fa.set_flow_style()
        return seq
    if isinstance(new, Mapping):
        node = CommentedMap()
        for key, value in new.items():
            node[key] = _keep_style(None, value)
        return node
    return new


# -- the trust root -----------------------------------------------------------------------------

# The kernel's own keys of the trust root: which plugins load is which code runs; the store
# is where every principal's data lives (its sections are the store plugins', which may declare
# them themselves; declared twice is the same).
KERNEL_TRUST_ROOT = (
    ConfigSection.trust_root("plugins", doc="which plugins load: which code runs"),
    ConfigSection.trust_root("store", doc="where data lives: the SQLite file"),
    ConfigSection.trust_root("postgres", doc="where data lives: the PostgreSQL DSN"),
)
NAMES_A_VARIABLE = "names an environment variable, or gives a command its environment"


def names_a_variable(key: str) -> bool:
    """``env`` and ``*_env`` keys: the trust root wherever they are, declared or not."""
    key = key.lower()
    return key == "env" or key.endswith("_env")


def trust_root_changes(
    sections: Iterable[OwnedSection],
    changes: Mapping[str, Any],
    scope: Scope = "workspace",
    *,
    aliases: Mapping[str, str] | None = None,
    saved: Mapping[str, Any] | None = None,
    kernel: Any = None,
    agent_id: str | None = None,
) -> dict[str, str]:
    """The dotted fields of ``changes`` that set, replace or delete part of the trust root,
    each with the reason (``ConfigSection.trust_root_changes``, which documents the rest).

    A field is refused when it is, or lies below, a key declared with
    :meth:`ConfigSection.trust_root` (whose ``allow``, if any, decides on the value instead);
    when its name is ``env`` or ends in ``_env``; or when a value other than a mapping replaces
    a section that holds such a key (declared below it, or ``*_env`` in the saved file or the
    value itself). A mapping merges member by member, so only its members are looked at.
    """
    declared = [
        (_pattern(section.key), section)
        for section in (*KERNEL_TRUST_ROOT, *(owned.section for owned in sections))
        if section.trust and section.scope == scope
    ]
    file = "config.yaml and restart" if scope == "workspace" else "the agent's SOUL.yaml"
    found: dict[str, str] = {}

    def refuse(path: tuple[str, ...], what: str) -> None:
        because = f" ({what})" if what else ""
        found[".".join(path)] = (
            f"part of the trust root{because}: not changeable over HTTP; edit {file}"
        )

    def visit(path: tuple[str, ...], value: Any) -> None:
        canonical = _canonical(path, aliases or {})
        for pattern, section in declared:
            size = len(pattern)
            if len(canonical) < size or not _matches(canonical[:size], pattern):
                continue
            if section.allow is None or kernel is None or len(canonical) > size:
                refuse(path, section.doc)  # (a check in part needs the kernel to look)
                return
            at = _saved_at(saved, canonical)
            for part, reason in section.allow(kernel, agent_id, value, at).items():
                found[".".join((*path, part) if part else path)] = reason
            return
        if names_a_variable(path[-1]):
            refuse(path, NAMES_A_VARIABLE)
        elif isinstance(value, Mapping):
            for key, member in value.items():
                visit((*path, *str(key).split(".")), member)
        else:  # replaces whatever the file has there: a section holding trust-root keys?
            holding = next(
                (
                    section
                    for pattern, section in declared
                    if len(pattern) > len(canonical)
                    and _matches(canonical, pattern[: len(canonical)])
                ),
                None,
            )
            if holding is not None:
                refuse(path, holding.doc)
            elif _holds_variables(value) or _holds_variables(_saved_at(saved, canonical)):
                refuse(path, NAMES_A_VARIABLE)

    for key, value in changes.items():
        visit(tuple(str(key).split(".")), value)
    return found


def _canonical(path: tuple[str, ...], aliases: Mapping[str, str]) -> tuple[str, ...]:
    """``path`` under the new name of an old one (``Settings.aliases``)."""
    for old, new in aliases.items():
        parts = tuple(old.split("."))
        if path[: len(parts)] == parts:
            return (*new.split("."), *path[len(parts) :])
    return path


def _saved_at(saved: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    node: Any = saved
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _holds_variables(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(names_a_variable(str(k)) or _holds_variables(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_variables(v) for v in value)
    return False
