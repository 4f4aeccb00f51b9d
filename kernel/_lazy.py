"""Names a package exports but imports on first use (PEP 562), so that importing it stays light.

A plugin package is imported to register the plugin (``soulacy --help``, ``soulacy plugins``):
what its hooks use and the names it re-exports load when first used (decision 0038).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` is imported from its
    module (``"._store"``, relative to the package, or an absolute name) on first use, then
    kept in the package. Any other name is an ``AttributeError``, as for a plain module::

        if not TYPE_CHECKING:  # type checkers see the TYPE_CHECKING imports instead
            __getattr__ = lazy_exports(__name__, {"SQLiteStore": "._store"})
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
