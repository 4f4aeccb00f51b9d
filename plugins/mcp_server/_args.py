"""The arguments of ``soulacy mcp serve`` (argparse only: imported for ``--help`` without what
the command does)."""

from __future__ import annotations

import argparse


def configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="serve over standard input and output (the transport this command serves;"
        " streamable HTTP is `soulacy serve`, at /mcp)",
    )
