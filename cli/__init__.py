"""The ``soulacy`` command-line launcher (``soulacy …``, or ``python -m soulacy.cli …``).

A client of the kernel, not part of it (decision 0075). Plugins add subcommands with the hook
``soulacy_cli_commands`` and the contract :class:`soulacy.kernel.CliCommand` and
:class:`soulacy.kernel.CliContext`, which the kernel defines. The launcher itself is imported
when :func:`main` runs, not when this package is.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: this module is on `soulacy --help`'s path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of the ``soulacy`` command; returns the exit code."""
    from ._launcher import main as launch

    return launch(argv, environ)
