"""Editing a round-trip YAML document in place: only what changed is touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.scalarstring import ScalarString


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
    doc: CommentedMap, changes: Mapping[str, Any], aliases: Mapping[str, str] | None = None
) -> list[str]:
    """Merge ``changes`` into ``doc`` and return the dotted keys whose values changed.

    Mappings merge member by member (a section's other saved keys stay); any other value
    replaces what was there. A value equal to the saved one is not a change. ``aliases`` maps
    old dotted names to new ones (``Settings.aliases``): a change of a new name that the file
    writes under its old name only is made to the old name's line, in place.
    """
    changed: list[str] = []
    if aliases:
        changes = {_saved_name(doc, str(key), aliases): v for key, v in changes.items()}

    def merge(node: CommentedMap, updates: Mapping[str, Any], prefix: str) -> None:
        for key, value in updates.items():
            path = f"{prefix}{key}"
            if isinstance(value, Mapping):
                child = node.get(key)
                if not isinstance(child, CommentedMap):
                    child = CommentedMap()
                    if key in node and node[key] is not None:
                        changed.append(path)
                    node[key] = child
                merge(child, value, path + ".")
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


def _keep_style(old: Any, new: Any) -> Any:
    """A quoted string stays quoted the same way when its value changes."""
    if isinstance(old, ScalarString) and isinstance(new, str):
        return type(old)(new)
    return new
