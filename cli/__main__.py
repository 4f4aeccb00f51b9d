"""``python -m soulacy.cli``: the ``soulacy`` command."""

from __future__ import annotations

import sys

from soulacy.cli import main

if __name__ == "__main__":
    sys.exit(main())
