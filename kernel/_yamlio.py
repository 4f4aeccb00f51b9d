"""YAML files read with ruamel's round-trip mode.

Round-trip keeps comments, quoting and key order, and every key keeps its line and column for
error messages. Writing a person's file back so that only what changed differs is the
``soulacy.plugins.yamledit`` library's (docs/decisions/0069-approvals-are-a-plugin.md moved
it out of the kernel with the other features).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from ._errors import ConfigError, ConfigIssue, Location


def _round_trip() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    return yaml


def parse_yaml(text: str, filename: str) -> CommentedMap:
    """Parse a YAML document that must be a mapping (an empty file is an empty mapping)."""
    try:
        doc = _round_trip().load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = Location(filename, mark.line + 1, mark.column + 1) if mark else Location(filename)
        problem = exc.problem or exc.context or "malformed YAML"
        raise ConfigError([ConfigIssue(loc, "", f"malformed YAML: {problem}")]) from None
    except YAMLError as exc:  # an error without a position
        problem = " ".join(str(exc).split()) or "malformed YAML"
        raise ConfigError(
            [ConfigIssue(Location(filename), "", f"malformed YAML: {problem}")]
        ) from None
    except RecursionError:
        message = "malformed YAML: nested too deeply to read"
        raise ConfigError([ConfigIssue(Location(filename), "", message)]) from None
    if doc is None:
        return CommentedMap()
    if not isinstance(doc, CommentedMap):
        raise ConfigError(
            [ConfigIssue(Location(filename, 1, 1), "", "expected a mapping of keys at the top")]
        )
    return doc


def load_yaml_file(path: Path) -> CommentedMap:
    """Read ``path``; a missing file is an empty mapping, an unreadable one is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CommentedMap()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(Location(str(path)), "", f"cannot read: {exc}")]) from None
    return parse_yaml(text, str(path))


def position(doc: Any, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """The 1-based (line, column) of the key at ``path`` in a round-trip document, if known."""
    node, found = doc, None
    for part in path:
        try:
            if isinstance(node, CommentedMap) and part in node:
                line, col = node.lc.key(part)
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and 0 <= part < len(node):
                line, col = node.lc.item(part)
            else:
                break
        except (KeyError, TypeError):  # a key added in memory has no position yet
            break
        found = (line + 1, col + 1)
        node = node[part]
    return found
