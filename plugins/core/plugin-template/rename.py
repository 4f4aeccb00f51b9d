"""Make this template your plugin: ``python rename.py NAME`` (letters, digits, underscores).

Replaces the placeholder name ``hello`` everywhere: file contents, the package folder and the
distribution name (``soulacy-hello`` -> ``soulacy-NAME``), then deletes this script.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PLACEHOLDER = "hello"


def rename(root: Path, name: str) -> None:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise SystemExit(f"plugin name {name!r}: use lowercase letters, digits and underscores")
    title = name.replace("_", " ").title().replace(" ", "")
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file() and path.suffix in {".py", ".toml", ".md", ".txt", ".cfg"}:
            text = path.read_text(encoding="utf-8")
            text = re.sub(rf"\b{PLACEHOLDER}\b", name, text)
            text = text.replace(f"soulacy_{PLACEHOLDER}", f"soulacy_{name}")
            text = text.replace(f"soulacy-{PLACEHOLDER}", f"soulacy-{name.replace('_', '-')}")
            text = text.replace(PLACEHOLDER.title(), title)
            path.write_text(text, encoding="utf-8")
        if PLACEHOLDER in path.name:
            path.rename(path.with_name(path.name.replace(PLACEHOLDER, name)))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python rename.py NAME")
    here = Path(__file__).resolve().parent
    rename(here, sys.argv[1])
    Path(__file__).unlink()
    print(f"renamed the template to soulacy-{sys.argv[1].replace('_', '-')}")
