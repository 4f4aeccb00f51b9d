"""Saving changed fields of a workspace's config.yaml (``Kernel.update_config``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel.yamlio import parse_yaml

from ._edit import apply_changes
from ._write import atomic_write, dump_round_trip

if TYPE_CHECKING:
    from soulacy.kernel import Kernel


def save_config_changes(kernel: Kernel, changes: Mapping[str, Any]) -> list[str]:
    """Save ``changes`` into ``kernel``'s config.yaml and return the dotted keys that changed.

    Everything is validated before writing (the file alone first: an environment override
    must not hide a bad saved value); the write is atomic, and on any error the file stays
    byte for byte as it was and ``kernel.config`` as it was.
    """
    file = kernel.config_file
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    doc = parse_yaml(text, str(file))
    changed = apply_changes(doc, changes, kernel.config.aliases)
    if not changed:
        return []
    kernel.validate_config(doc, environ={})
    settings = kernel.validate_config(doc)
    atomic_write(file, dump_round_trip(doc, text, keep_unchanged_text=True))
    kernel.config = settings
    return changed
