"""Public round-trip YAML reading: a person's file with its comments, quoting and key order,
and every key's line and column for error messages.

``parse_yaml`` and ``load_yaml_file`` read; ``plain`` turns a parsed document into plain dicts,
lists and scalars for comparisons. Writing a file back so that only what changed differs
(``apply_changes``, ``dump_round_trip``, ``atomic_write``) is :mod:`soulacy.plugins.yamledit`.
"""

from __future__ import annotations

from typing import Any

from ._config import _plain
from ._yamlio import load_yaml_file, parse_yaml

__all__ = ["load_yaml_file", "parse_yaml", "plain"]


def plain(node: Any) -> Any:
    """``node`` as plain dicts, lists and scalars: ruamel's round-trip types (``CommentedMap``,
    ``ScalarFloat``, …) become ``dict``, ``list``, ``bool``, ``str``, ``int`` and ``float``."""
    return _plain(node)
