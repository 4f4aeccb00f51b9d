"""From a model's reply to the file that would be saved: extract the YAML, strip embedded
limits, merge into the file on disk by round-trip editing, apply the person's explicit choices.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml.comments import CommentedMap

from soulacy.kernel.yamlio import parse_yaml as parse
from soulacy.kernel.yamlio import plain
from soulacy.plugins.yamledit import dump_round_trip as dump

from ._spec import LIMIT_PATHS, BuildSpec

# A fenced block; an unterminated one (a truncated reply) runs to the end.
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_LIMITS = frozenset(LIMIT_PATHS)
REPLY = "the reply"  # the file name of the model's YAML in error messages


@attrs.frozen
class Candidate:
    """One attempt's agent file: ``text`` as it would be saved and ``doc`` parsed back from it
    (so that validation errors point at its lines)."""

    text: str
    doc: Any
    stripped: tuple[str, ...]  # limits the model wrote that the saved file does not have


def extract_yaml(reply: str) -> str:
    """The first ``yaml`` fenced block, else the first fenced block, else the whole reply."""
    blocks = _FENCE.findall(reply)
    for lang, body in blocks:
        if lang.lower() in ("yaml", "yml"):
            return str(body)
    return str(blocks[0][1]) if blocks else reply


def compose(reply_yaml: str, base_text: str, spec: BuildSpec, file: Path) -> Candidate:
    """Merge the model's document into ``base_text`` (the file on disk, "" for a new agent).

    Raises ConfigError when the model's YAML does not parse.
    """
    proposed = parse(reply_yaml, REPLY)
    base = parse(base_text, str(file))
    # Reported: what the model embedded that the saved file will not have at all (a limit the
    # person set stays, whatever the model wrote for it).
    kept = {".".join(p) for p in LIMIT_PATHS if _node(base, p) is not None}
    stripped = tuple(p for p in strip_limits(proposed, spec) if p not in kept)
    merge(base, proposed)
    apply_explicit(base, spec)
    text = dump(base, base_text)
    return Candidate(text, parse(text, str(file)), stripped)


def strip_limits(doc: MutableMapping[str, Any], spec: BuildSpec) -> tuple[str, ...]:
    """Remove every execution limit from a model's document; returns those the person did not
    ask for (the asked ones are set from the spec afterwards anyway)."""
    asked = spec.asked_limits()
    removed = []
    for path in LIMIT_PATHS:
        parent = _node(doc, path[:-1])
        if not isinstance(parent, MutableMapping) or path[-1] not in parent:
            continue
        del parent[path[-1]]
        if path not in asked:
            removed.append(".".join(path))
        if len(path) > 1 and not parent:  # an emptied reasoning: or llm: said nothing else
            del doc[path[0]]
    return tuple(removed)


def merge(base: MutableMapping[str, Any], new: Mapping[str, Any], at: tuple[str, ...] = ()) -> None:
    """Make ``base`` say what ``new`` says, editing it in place so that unchanged keys keep
    their comments and formatting. Limit paths are left exactly as ``base`` has them: a build
    never rewrites (or removes) a limit the person set."""
    for key in list(base):
        path = (*at, str(key))
        if path in _LIMITS or key in new:
            continue
        if _limits_below(path) and isinstance(base[key], MutableMapping):
            merge(base[key], {}, path)  # keep the person's limits inside (llm.max_tokens)
            if not base[key]:
                del base[key]
        else:
            del base[key]
    for key, value in new.items():
        path = (*at, str(key))
        if path in _LIMITS:
            continue
        current = base.get(key)
        if isinstance(current, MutableMapping) and _limits_below(path) and value is None:
            value = {}  # "llm:" left empty must not drop the person's llm.max_tokens
        if isinstance(current, MutableMapping) and isinstance(value, Mapping):
            merge(current, value, path)
        elif key not in base or plain(current) != plain(value):
            base[key] = value


def apply_explicit(doc: MutableMapping[str, Any], spec: BuildSpec) -> None:
    """Write what the spec states: the id, and the name, description, tools, llm keys and
    limits the person gave. Values that are already equal keep their formatting."""
    if "id" not in doc and isinstance(doc, CommentedMap):
        doc.insert(0, "id", spec.id)
    _set(doc, ("id",), spec.id)
    if spec.name is not None:
        _set(doc, ("name",), spec.name)
    if spec.description is not None:
        _set(doc, ("description",), spec.description)
    if spec.tools is not None:
        _set(doc, ("tools",), list(spec.tools))
    for key, value in spec.llm.items():
        _set(doc, ("llm", key), value)
    for path, value in spec.asked_limits().items():
        _set(doc, path, value)


def _limits_below(path: tuple[str, ...]) -> bool:
    return any(len(p) > len(path) and p[: len(path)] == path for p in LIMIT_PATHS)


def _node(doc: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = doc
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _set(doc: MutableMapping[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = doc
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, MutableMapping):
            child = node[part] = CommentedMap()
        node = child
    key = path[-1]
    if key in node and plain(node[key]) == plain(value):
        return
    node[key] = copy.deepcopy(value)
