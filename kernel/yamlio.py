"""Public round-trip YAML helpers: edit a person's file so that only what changed differs.

``parse_yaml`` keeps comments, quoting and key order; ``apply_changes`` merges changed fields
into a parsed document (a mapping merges, never replaces); ``dump_round_trip`` writes with the
file's own indentation; ``atomic_write`` replaces a file whole or not at all; ``plain`` turns a
parsed document into plain dicts, lists and scalars for comparisons.
"""

from __future__ import annotations

from typing import Any

from ._config import _plain
from ._config_edit import apply_changes
from ._yamlio import atomic_write, dump_round_trip, guess_indentation, load_yaml_file, parse_yaml

__all__ = [
    "apply_changes",
    "atomic_write",
    "dump_round_trip",
    "guess_indentation",
    "load_yaml_file",
    "parse_yaml",
    "plain",
]


def plain(node: Any) -> Any:
    """``node`` as plain dicts, lists and scalars: ruamel's round-trip types (``CommentedMap``,
    ``ScalarFloat``, …) become ``dict``, ``list``, ``bool``, ``str``, ``int`` and ``float``."""
    return _plain(node)
