"""The ``soulacy`` command-line launcher (``python -m soulacy.kernel.cli``).

``CliCommand`` and ``CliContext``, for plugins that add subcommands, are exported from
:mod:`soulacy.kernel`. The launcher is imported when :func:`main` runs, not when this module is.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of the ``soulacy`` command; returns the exit code."""
    from ._cli import main as launch

    return launch(argv, environ)


if __name__ == "__main__":
    sys.exit(main())
