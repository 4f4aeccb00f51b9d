"""The ``soulacy`` launcher: global options, then subcommands contributed by plugins."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, cast

import attrs
import trio

from ._errors import PluginError, SoulacyError, UsageError
from ._kernel import Kernel, LoadedPlugins, load_plugins

Runner = Callable[[argparse.Namespace, "CliContext"], Any]


@attrs.frozen
class CliCommand:
    """A subcommand. ``name`` may have two words (``"config set"``) to nest under a group.

    ``run(args, ctx)`` returns an exit code (None means 0); it may be ``async def``, in which
    case the launcher runs it under ``trio.run``.
    """

    name: str
    help: str
    run: Runner
    configure: Callable[[argparse.ArgumentParser], None] = lambda parser: None


@attrs.define
class CliContext:
    """What a subcommand gets besides its arguments: the kernel (loaded on first use) and output."""

    plugins: LoadedPlugins
    out: TextIO = attrs.field(factory=lambda: sys.stdout)
    err: TextIO = attrs.field(factory=lambda: sys.stderr)
    _kernel: Kernel | None = None

    def kernel(self) -> Kernel:
        if self._kernel is None:
            self._kernel = Kernel.from_plugins(self.plugins)
            for warning in self._kernel.config.warnings:
                self.warn(warning)
        return self._kernel

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    def print_json(self, data: Any) -> None:
        print(json.dumps(data, indent=2, sort_keys=True, default=str), file=self.out)

    def warn(self, text: str) -> None:
        print(f"soulacy: warning: {text}", file=self.err)


def _global_parser(add_help: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soulacy",
        description="Soulacy: a plugin-based runtime for long-running LLM agents.",
        add_help=add_help,
    )
    parser.add_argument(
        "--workspace",
        "-w",
        metavar="DIR",
        help="workspace folder (default: $SOULACY_WORKSPACE or the current folder)",
    )
    parser.add_argument(
        "-p",
        dest="plugins",
        action="append",
        default=[],
        metavar="NAME",
        help="enable plugin NAME (a builtin, an entry point or a module); -p no:NAME disables it",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    return parser


def _collect_commands(loaded: LoadedPlugins) -> list[CliCommand]:
    commands: dict[str, tuple[CliCommand, str]] = {}
    for impl in loaded.pm.hook.soulacy_cli_commands.get_hookimpls():
        for command in cast("Sequence[CliCommand]", impl.function() or ()):
            if command.name in commands:
                other = commands[command.name][1]
                raise PluginError(
                    f"plugins {other!r} and {impl.plugin_name!r} both define the command"
                    f" {command.name!r}"
                )
            commands[command.name] = (command, impl.plugin_name)
    for name, (_, plugin) in commands.items():
        words = name.split()
        if not 1 <= len(words) <= 2:
            raise PluginError(f"plugin {plugin!r}: command name {name!r} must be one or two words")
    return [command for command, _ in sorted(commands.values(), key=lambda c: c[0].name)]


def _build_parser(commands: Sequence[CliCommand]) -> argparse.ArgumentParser:
    parser = _global_parser(add_help=True)
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    singles: dict[str, argparse.ArgumentParser] = {}
    for command in commands:  # sorted: "runs" comes before "runs show"
        words = command.name.split()
        if len(words) == 1:
            sub = top.add_parser(words[0], help=command.help, description=command.help)
            singles[words[0]] = sub
        else:
            group = groups.get(words[0])
            if group is None:
                # "runs show" under "runs": the bare group runs the one-word command, if any
                holder = singles.get(words[0]) or top.add_parser(
                    words[0], help=f"{words[0]} commands"
                )
                group = holder.add_subparsers(
                    dest=f"{words[0]}_command",
                    metavar="COMMAND",
                    required=words[0] not in singles,
                )
                groups[words[0]] = group
            sub = group.add_parser(words[1], help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of the ``soulacy`` command; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    early, _ = _global_parser(add_help=False).parse_known_args(args_list)
    try:
        loaded = load_plugins(early.workspace, plugins=early.plugins, environ=environ)
        if loaded.issues:
            Kernel.from_plugins(loaded)  # raises every problem of config.yaml together
        parser = _build_parser(_collect_commands(loaded))
        args = parser.parse_args(args_list)
        ctx = CliContext(loaded)
        run: Runner = args._run
        code = trio.run(run, args, ctx) if inspect.iscoroutinefunction(run) else run(args, ctx)
        return int(code or 0)
    except (SoulacyError, BaseExceptionGroup) as raised:
        exc = _soulacy_error(raised)
        if isinstance(exc, KeyboardInterrupt):
            return 130
        if exc is None:
            raise
        if early.debug:
            traceback.print_exception(raised)
        print(f"soulacy: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `soulacy … | head`: the reader left; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _soulacy_error(exc: BaseException) -> Any:
    """The error to report (a SoulacyError, or KeyboardInterrupt for Ctrl-C): itself, or the
    one inside a group raised through a nursery; None for anything else (a bug)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, SoulacyError | KeyboardInterrupt) else None


__all__ = ["CliCommand", "CliContext", "UsageError", "main"]
