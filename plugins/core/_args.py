"""The arguments of the core commands: argparse only, so that declaring the commands (and
printing ``soulacy --help``) imports nothing of what they do (decision 0036)."""

from __future__ import annotations

import argparse


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return port


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="the address to listen on (default: server.host, 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=_port,
        help="the port to listen on, 0 for any free one (default: server.port, 8484)",
    )


def _configure_get(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", help="dotted key, e.g. runtime.timeouts.run")
    _json_flag(parser)


def _configure_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", help="dotted key, e.g. runtime.default_max_turns")
    # REMAINDER: a value that starts with '-' (-5s, -1) is a value, not an option
    parser.add_argument(
        "value", nargs=argparse.REMAINDER, help="a YAML value: 300, 48h, -1, false, '[a, b]'"
    )


def _configure_new(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="agent id: letters, digits, '-' and '_'")
    parser.add_argument("--name", help="display name (default: the id)")
    parser.add_argument("--description", default="", help="one line on what the agent is for")


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="session id")
    parser.add_argument("--agent", help="only this agent's messages")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_runs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only this agent's runs")
    parser.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="run id")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_cancel(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="run id")
    parser.add_argument("--reason", default="cancelled", help="why (default: cancelled)")


def _configure_continue(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="the id of a run that ended incomplete")
    parser.add_argument(
        "text", nargs="?", default="", help="a steering message for the agent (optional)"
    )
    parser.add_argument("--max-turns", type=int, help="turns allowed to this attempt")
    parser.add_argument("--run-timeout", help="this attempt's run timeout, such as 30m")
    parser.add_argument("--stream", action="store_true", help="print the reply as it arrives")
    parser.add_argument("--json", action="store_true", help="print reply and metadata as JSON")


def _configure_plugin_new(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="plugin name: lowercase letters, digits, underscores")
    parser.add_argument("--dest", help="folder to create (default: ./soulacy-NAME)")


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", help="agent id")
    parser.add_argument("text", help="the request; '-' reads it from standard input")
    parser.add_argument("--session", help="conversation id (default: a new one)")
    parser.add_argument("--run-id", help="run id (default: a new one)")
    parser.add_argument("--stream", action="store_true", help="print the reply as it arrives")
    parser.add_argument("--json", action="store_true", help="print reply and metadata as JSON")


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", metavar="DIR", help="write the demo workspace here and keep it")
    parser.add_argument("--json", action="store_true", help="print reply and metadata as JSON")
