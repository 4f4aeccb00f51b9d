"""The ``soulacy`` command-line launcher (``python -m soulacy.kernel.cli``)."""

from __future__ import annotations

import sys

from ._cli import CliCommand, CliContext, main

__all__ = ["CliCommand", "CliContext", "main"]

if __name__ == "__main__":
    sys.exit(main())
