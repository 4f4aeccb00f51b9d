"""The arguments of the ``runs approve|deny|happened|approvals`` commands (argparse only:
imported for ``--help`` without what the commands do)."""

from __future__ import annotations

import argparse


def configure_decide(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="run id")
    parser.add_argument("call_id", help="the tool call's id (see `soulacy runs approvals`)")
    parser.add_argument(
        "--approver", help="who decides, as the proof records it (default: your user name)"
    )
    parser.add_argument("--note", help="why; the model is told it with a denial")
    parser.add_argument("--json", action="store_true", help="print JSON")


def configure_happened(parser: argparse.ArgumentParser) -> None:
    configure_decide(parser)
    parser.add_argument(
        "--result",
        required=True,
        help="the call's result, as the model gets it (-: read from standard input)",
    )


def configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", nargs="?", help="only this run's")
    parser.add_argument("--all", action="store_true", help="decided requests too")
    parser.add_argument("--json", action="store_true", help="print JSON")
