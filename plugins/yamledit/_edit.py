"""Editing a round-trip YAML document in place: only what changed is touched."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString


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
