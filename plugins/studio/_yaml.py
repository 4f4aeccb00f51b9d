"""Round-trip YAML for agent files: comments, quoting and key order survive an edit.

The kernel has the same helpers in a private module (``kernel/_yamlio.py``); plugins may only
use public kernel modules, so the few lines needed are copied here until the kernel exports them.
"""

from __future__ import annotations

import io
import itertools
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from soulacy.kernel import ConfigError, ConfigIssue, Location

_KEY = re.compile(r"^( *)[^\s#-][^:#]*:\s*(#.*)?$")  # "key:" opening a block, maybe commented
_ITEM = re.compile(r"^( *)- +(\S)")


def _round_trip(mapping: int = 2, sequence: int = 4, offset: int = 2) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a person's long lines
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


def indentation(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) for ruamel's ``indent()``, read off the first nested block
    of each kind. ruamel's own guess misreads lists indented under their key and keys followed
    by a comment, and a wrong guess re-indents every line of the person's file."""
    mapping = sequence = offset = None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for parent, child in itertools.pairwise(lines):
        key = _KEY.match(parent)
        if key is None:
            continue
        base = len(key.group(1))
        item = _ITEM.match(child)
        if item is not None and sequence is None:
            offset, sequence = len(item.group(1)) - base, item.start(2) - base
        elif item is None and mapping is None and len(child) - len(child.lstrip(" ")) > base:
            mapping = len(child) - len(child.lstrip(" ")) - base
        if mapping is not None and sequence is not None:
            break
    mapping = mapping or 2
    if sequence is None or offset is None:
        offset, sequence = mapping, mapping * 2
    return mapping, sequence, offset


def parse(text: str, filename: str) -> Any:
    """A YAML mapping as a ruamel ``CommentedMap`` (empty text is an empty mapping)."""
    try:
        doc = _round_trip().load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        loc = Location(filename, mark.line + 1, mark.column + 1) if mark else Location(filename)
        raise ConfigError([ConfigIssue(loc, "", f"malformed YAML: {problem}")]) from None
    if doc is None:
        return CommentedMap()
    if not isinstance(doc, CommentedMap):
        issue = ConfigIssue(Location(filename, 1, 1), "", "expected a mapping of keys at the top")
        raise ConfigError([issue])
    return doc


def dump(doc: Any, original_text: str) -> str:
    """Serialize ``doc`` with the indentation the original file used (2 when there is none)."""
    out = io.StringIO()
    _round_trip(*indentation(original_text)).dump(doc, out)
    return out.getvalue()


def plain(node: Any) -> Any:
    """Plain dicts, lists and scalars, to compare values regardless of formatting and order."""
    if isinstance(node, Mapping):
        return {str(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    for kind in (bool, str, int, float):  # bool before int: bool is an int subclass
        if isinstance(node, kind):
            return kind(node)
    return node


def atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, then rename it over ``path``: a crash
    leaves the old file or the new one, never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
