"""What reads a SQLite file from outside the store needs of its format."""

from __future__ import annotations

from pathlib import Path


def is_wal(path: Path) -> bool:
    """Whether the database file's header says WAL (file format version 2 at bytes 18-19)."""
    try:
        with path.open("rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18:20] == b"\x02\x02"
