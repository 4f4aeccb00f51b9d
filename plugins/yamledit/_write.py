"""Writing a round-trip YAML document back: the file's own indentation, each null as it was
spelled, and every key whose value did not change byte for byte as the person wrote it;
files replaced atomically."""

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
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.representer import RoundTripRepresenter

_NULL = "tag:yaml.org,2002:null"


class _SpelledNull:
    """A None that the file spelled out (``null``, ``~``, ``Null``): written back as it was.

    ruamel.yaml loads ``key:`` and ``key: null`` alike as None and writes every None of a
    mapping as ``key:``, so a rewrite would change each ``key: null`` line of a file. Only for
    the time of a dump, such a None is stood in for by this marker, which the representer below
    writes with the file's own text.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Representer(RoundTripRepresenter):
    pass


def _represent_spelled_null(representer: RoundTripRepresenter, data: _SpelledNull) -> Any:
    return representer.represent_scalar(_NULL, data.text)


_Representer.add_representer(_SpelledNull, _represent_spelled_null)


def _round_trip(mapping: int = 2, sequence: int = 4, offset: int = 2) -> YAML:
    yaml = YAML(typ="rt")
    yaml.Representer = _Representer
    yaml.preserve_quotes = True
    yaml.width = 4096  # never re-wrap a person's long lines
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yaml


_KEY = re.compile(r"^( *)[^\s#-][^:#]*:\s*(#.*)?$")  # "key:" opening a block (maybe commented)
_ITEM = re.compile(r"^( *)- +(\S)")


def guess_indentation(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) as ruamel's ``indent()`` takes them, read off the file.

    ruamel's own guess misreads common styles (a list under its key indented or not, a
    comment after the key), and a wrong guess re-indents every line on save.
    """
    mapping = sequence = offset = None
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    for parent, child in itertools.pairwise(lines):
        key = _KEY.match(parent)
        if key is None:
            continue
        base = len(key.group(1))
        item = _ITEM.match(child)
        if item is not None and sequence is None:
            offset = len(item.group(1)) - base
            sequence = item.start(2) - base
        elif item is None and mapping is None:
            depth = len(child) - len(child.lstrip(" "))
            if depth > base:
                mapping = depth - base
        if mapping is not None and sequence is not None:
            break
    mapping = mapping or 2
    if sequence is None:
        offset, sequence = mapping, mapping * 2
    return mapping, sequence, offset or 0


def spelled_nulls(text: str) -> dict[tuple[str | int, ...], str]:
    """Where the YAML ``text`` spells a null out (``key: null``, ``- ~``), by key path (mapping
    keys as written, sequence indexes as ints), with the text used; ``key:`` is not listed."""
    try:
        root = _round_trip().compose(text)
    except (YAMLError, RecursionError):  # not this function's to report
        return {}
    found: dict[tuple[str | int, ...], str] = {}
    stack: list[tuple[Node | None, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, MappingNode):
            stack.extend(
                (value, (*path, str(key.value)))
                for key, value in node.value
                if isinstance(key, ScalarNode)
            )
        elif isinstance(node, SequenceNode):
            stack.extend((value, (*path, n)) for n, value in enumerate(node.value))
        elif isinstance(node, ScalarNode) and str(node.tag) == _NULL and node.value:
            found[path] = str(node.value)
    return found


def _mark_spelled_nulls(
    doc: CommentedMap, spelled: Mapping[tuple[str | int, ...], str]
) -> list[tuple[Any, Any]]:
    """Stand markers in for the Nones of ``doc`` that the original spelled out; returns the
    (container, key) pairs changed, for :func:`dump_round_trip` to put None back."""
    changed: list[tuple[Any, Any]] = []
    if not spelled:
        return changed
    prefixes = {path[:n] for path in spelled for n in range(len(path))}
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if path not in prefixes:
            continue
        items: Any = (
            ((key, str(key)) for key in node)
            if isinstance(node, CommentedMap)
            else ((n, n) for n in range(len(node)))
            if isinstance(node, CommentedSeq)
            else ()
        )
        for key, part in items:
            value, here = node[key], (*path, part)
            if value is None and here in spelled:
                node[key] = _SpelledNull(spelled[here])
                changed.append((node, key))
            elif isinstance(value, CommentedMap | CommentedSeq):
                stack.append((value, here))
    return changed


def dump_round_trip(
    doc: CommentedMap, original_text: str, *, keep_unchanged_text: bool = False
) -> str:
    """Serialize ``doc`` with the indentation that the original file used, and each null as
    the original spelled it: ``key: null`` stays ``key: null``, ``key:`` stays ``key:``.

    With ``keep_unchanged_text``, each key whose value ``doc`` does not change is written with
    the original's own text, byte for byte (:func:`keep_unchanged_lines`): spacing, indentation
    and flow styles that ruamel would write its own way stay as the person wrote them.
    """
    out = io.StringIO()
    marked = _mark_spelled_nulls(doc, spelled_nulls(original_text))
    try:
        _round_trip(*guess_indentation(original_text)).dump(doc, out)
    finally:
        for node, key in marked:
            node[key] = None
    text = out.getvalue()
    return keep_unchanged_lines(original_text, text) if keep_unchanged_text else text


def keep_unchanged_lines(original_text: str, new_text: str) -> str:
    """``new_text`` with the lines of every key whose value it does not change taken from
    ``original_text``; the changed keys' lines (and new ones) stay as ``new_text`` has them.

    Both are YAML documents whose top is a block mapping; a key's lines run from its own line
    to the next key's (comments and blank lines after its value go with it). A changed block
    mapping is spliced member by member; anything else changed is taken whole. The result is
    read back: unless it holds exactly what ``new_text`` holds, ``new_text`` is returned.
    """
    try:
        old, new = _round_trip().load(original_text), _round_trip().load(new_text)
    except (YAMLError, RecursionError):
        return new_text
    if not (isinstance(old, CommentedMap) and isinstance(new, CommentedMap)):
        return new_text
    old_lines = original_text.splitlines(keepends=True)
    new_lines = new_text.splitlines(keepends=True)
    chunks = _splice(old, new, old_lines, new_lines, (0, len(old_lines)), (0, len(new_lines)))
    if chunks is None:
        return new_text
    text = ""
    for chunk in chunks:
        if text and not text.endswith("\n"):
            text += "\n"
        text += chunk
    try:
        again = _round_trip().load(text)
    except (YAMLError, RecursionError):
        return new_text
    return text if _same(again, new) else new_text


def _key_lines(node: CommentedMap, start: int, end: int) -> list[int] | None:
    """The 0-based line of each key of a block mapping within lines [start, end), if they
    are on lines of their own (strictly increasing after ``start``'s), else None."""
    lines = []
    for key in node:
        try:
            lines.append(node.lc.key(key)[0])
        except (KeyError, TypeError, AttributeError):
            return None
    if not lines or lines[0] < start or lines[-1] >= end:
        return None
    if any(b <= a for a, b in itertools.pairwise(lines)):
        return None
    return lines


def _splice(
    old: CommentedMap,
    new: CommentedMap,
    old_lines: list[str],
    new_lines: list[str],
    old_range: tuple[int, int],
    new_range: tuple[int, int],
) -> list[str] | None:
    """The chunks of text of ``new``'s lines ``new_range``: an unchanged key's from the old
    text's ``old_range``, a changed one's from the new text (block mappings: member by member)."""
    old_at = _key_lines(old, *old_range)
    new_at = _key_lines(new, *new_range)
    if old_at is None or new_at is None:
        return None
    old_keys, new_keys = list(old), list(new)
    old_spans = dict(zip(old_keys, itertools.pairwise([*old_at, old_range[1]]), strict=True))
    new_spans = dict(zip(new_keys, itertools.pairwise([*new_at, new_range[1]]), strict=True))
    same_start = old_keys[0] == new_keys[0]
    head = (
        old_lines[old_range[0] : old_at[0]] if same_start else new_lines[new_range[0] : new_at[0]]
    )
    chunks = ["".join(head)] if head else []
    for key in new_keys:
        new_span = new_spans[key]
        if key not in old:
            chunks.append("".join(new_lines[slice(*new_span)]))
            continue
        old_span = old_spans[key]
        before, after = old[key], new[key]
        inner = None
        if _same(before, after):
            chunks.append("".join(old_lines[slice(*old_span)]))
            continue
        if (
            isinstance(before, CommentedMap)
            and isinstance(after, CommentedMap)
            and before
            and after
            and not before.fa.flow_style()
            and not after.fa.flow_style()
        ):
            inner = _splice(before, after, old_lines, new_lines, old_span, new_span)
        chunks.extend(inner if inner is not None else ["".join(new_lines[slice(*new_span)])])
    return [chunk for chunk in chunks if chunk]


def _same(a: Any, b: Any) -> bool:
    """Equal as data, types included (``1`` is not ``True``, ``"1"`` is not ``1``), keys in
    the same order."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and list(a) == list(b)
            and all(_same(a[k], b[k]) for k in a)
        )
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    kinds = (bool, int, float, str)
    return bool(
        a == b
        and all(isinstance(a, kind) == isinstance(b, kind) for kind in kinds)
        and (a is None) == (b is None)
    )


def atomic_write(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder and rename it over ``path``.

    A crash or a full disk leaves either the old file or the new one, never half of either.
    """
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
