"""Deprecated: the kits and helpers moved to :mod:`soulacy.testing`, the fixtures to
:mod:`soulacy.testing.pytest_plugin`. This module forwards to both for one release.

``from soulacy.kernel.testing import check_store`` becomes
``from soulacy.testing import check_store`` (each name read here warns), and ``pytest_plugins =
["soulacy.kernel.testing"]`` becomes ``pytest_plugins = ["soulacy.testing.pytest_plugin"]``.
Until then, registering this module as a pytest plugin registers the new one (its
``pytest_plugins``), so the fixtures ``workspace``, ``make_kernel``, ``kernel`` and
``hook_recorder`` keep working; importing it does not import pytest.
"""

from __future__ import annotations

import warnings

from soulacy.testing import __all__ as __all__

pytest_plugins = ["soulacy.testing.pytest_plugin"]


def __getattr__(name: str) -> object:
    """A name of :mod:`soulacy.testing`, with a DeprecationWarning (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"soulacy.kernel.testing is deprecated: import {name} from soulacy.testing",
        DeprecationWarning,
        stacklevel=2,
    )
    import soulacy.testing

    return getattr(soulacy.testing, name)
