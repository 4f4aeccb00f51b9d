"""Deprecated: the launcher is :mod:`soulacy.cli` (``python -m soulacy.cli``; decision 0075).
This alias of its ``main`` warns, and goes in the next release."""

from __future__ import annotations

import sys
import warnings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Deprecated: :func:`soulacy.cli.main`."""
    warnings.warn(
        "soulacy.kernel.cli is deprecated: use soulacy.cli (python -m soulacy.cli)",
        DeprecationWarning,
        stacklevel=2,
    )
    from soulacy.cli import main as launch

    return launch(argv, environ)


if __name__ == "__main__":
    sys.exit(main())
