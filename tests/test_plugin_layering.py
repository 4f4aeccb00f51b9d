"""Plugins never import each other: a plugin reaches another's work through the kernel's
contracts and hooks (docs/hooks.md), so that either can be replaced or left out. The only
names a plugin may import from another package under ``soulacy.plugins`` are the library
packages' (``sqlkit``, ``providerkit``, ``proofkit``, ``yamledit``) and the HTTP plugin's
route types (``soulacy.plugins.http``). Every import counts, a function's own included: an
import put off to first use is still a dependency."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = frozenset({"sqlkit", "providerkit", "proofkit", "yamledit", "http"})


def imported(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every import in ``tree``, at any depth, relative ones resolved
    against ``package`` (the dotted package of the file)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            if base == "soulacy.plugins":  # from soulacy.plugins import approvals
                yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)
            else:
                yield node.lineno, base


def plugin_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["soulacy", "plugins"] else None


def crossings(folder: Path, package: str, root: Path = ROOT) -> list[str]:
    """Each import, in the files below ``folder`` (the package ``package``), of a plugin
    other than the file's own that is not a library package."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        inner = path.relative_to(folder).with_suffix("").parts
        dotted = ".".join([package, *inner[:-1]])
        own = dotted if inner[-1] == "__init__" else ".".join([package, *inner])
        tree = ast.parse(path.read_text(), str(path))
        for line, module in imported(tree, dotted):
            other = plugin_of(module)
            if other and other not in LIBRARIES and other != plugin_of(own):
                found.append(f"{path.relative_to(root)}:{line} imports {module}")
    return found


def test_no_plugin_imports_another_plugin_even_inside_a_function() -> None:
    found = []
    for folder in sorted((ROOT / "plugins").iterdir()):
        if (folder / "__init__.py").exists():
            found += crossings(folder, f"soulacy.plugins.{folder.name}")
    found += crossings(ROOT / "contrib", "soulacy.contrib")
    assert found == [], "plugins never import each other:\n" + "\n".join(found)


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    """A planted import, put off to first use, is found; a library package's is not."""
    folder = tmp_path / "agui"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "_routes.py").write_text(
        "from soulacy.plugins.http import HttpRoute\n"
        "def resume():\n"
        "    from soulacy.plugins.approvals import approvals_of\n"
        "    from soulacy.plugins import scheduler\n"
        "    from .._approvals_twin import x\n"
    )
    assert crossings(folder, "soulacy.plugins.agui", tmp_path) == [
        "agui/_routes.py:3 imports soulacy.plugins.approvals",
        "agui/_routes.py:4 imports soulacy.plugins.scheduler",
        "agui/_routes.py:5 imports soulacy.plugins._approvals_twin",
    ]
