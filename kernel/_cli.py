"""The ``soulacy`` launcher: global options, then subcommands contributed by plugins."""

from __future__ import annotations

import argparse
import importlib.metadata
import inspect
import json
import logging
import os
import platform
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO, cast

import attrs
import trio

from ._errors import ConfigError, PluginError, SoulacyError, UsageError
from ._kernel import AGENT_FILE, AGENTS_DIR, CONFIG_FILE, Kernel, LoadedPlugins, load_plugins
from ._manager import SoulacyPluginManager

Runner = Callable[[argparse.Namespace, "CliContext"], Any]


@attrs.frozen
class CliCommand:
    """A subcommand. ``name`` may have two words (``"config set"``) to nest under a group.

    ``run(args, ctx)`` returns an exit code (None means 0); it may be ``async def``, in which
    case the launcher runs it under ``trio.run``. A ``read_only`` command only reads: its kernel
    (``ctx.kernel()``) needs a workspace, and opens stores read-only, creating no file.
    """

    name: str
    help: str
    run: Runner
    configure: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    read_only: bool = False


KEPT_SHOWN = 3  # more kept keys than this are summarized in one warning (validate lists all)


@attrs.define
class CliContext:
    """What a subcommand gets besides its arguments: the kernel (loaded on first use) and output."""

    plugins: LoadedPlugins
    out: TextIO = attrs.field(factory=lambda: sys.stdout)
    err: TextIO = attrs.field(factory=lambda: sys.stderr)
    inp: TextIO = attrs.field(factory=lambda: sys.stdin)
    read_only: bool = False  # the command's CliCommand.read_only
    _kernel: Kernel | None = None

    def kernel(self) -> Kernel:
        if self._kernel is None:
            if self.read_only:
                require_workspace(self.plugins.root)
            kernel = Kernel.from_plugins(self.plugins)
            kernel.read_only = self.read_only
            self._kernel = kernel
            kept = {str(k) for k in kernel.config.kept}
            for warning in kernel.config.warnings:
                if warning not in kept or len(kept) <= KEPT_SHOWN:
                    self.warn(warning)
            if len(kept) > KEPT_SHOWN:  # an original workspace: say it once, not 70 times
                paths = [k.path for k in kernel.config.kept]
                self.warn(
                    f"{kernel.config.file.name}: {len(paths)} keys of the original format are kept"
                    f" with no effect (no loaded plugin implements them): {', '.join(paths[:5])}, …"
                    " — `soulacy config validate` lists each with its line"
                )
        return self._kernel

    def print(self, text: str = "") -> None:
        print(text, file=self.out)

    def print_json(self, data: Any) -> None:
        print(json.dumps(data, indent=2, sort_keys=True, default=str), file=self.out)

    def warn(self, text: str) -> None:
        print(f"soulacy: warning: {text}", file=self.err)


def is_workspace(folder: Path) -> bool:
    """A workspace is a folder with config.yaml, or with at least one agents/ID/SOUL.yaml."""
    return (folder / CONFIG_FILE).is_file() or any((folder / AGENTS_DIR).glob(f"*/{AGENT_FILE}"))


def require_workspace(folder: Path) -> None:
    if not is_workspace(folder):
        raise UsageError(
            f"{folder} is not a Soulacy workspace: a workspace is a folder with {CONFIG_FILE}"
            f" and/or {AGENTS_DIR}/ID/{AGENT_FILE}; pass --workspace DIR (or set"
            " SOULACY_WORKSPACE), or make this one with `soulacy agents new ID`"
        )


class _Parser(argparse.ArgumentParser):
    """A subcommand's parser reports what it does not know itself, with its own usage (argparse
    leaves unknown arguments to the top-level parser, whose usage says nothing of them)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "soulacy":
            hint = ""
            if any(extra.split("=")[0] in _GLOBAL_OPTIONS for extra in extras):
                hint = "; global options (-w, -p, --debug) go before the command"
            self.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed, extras


_GLOBAL_OPTIONS = {"--workspace", "-w", "-p", "--debug", "--log-level", "--version"}


def _version() -> str:
    try:
        version = importlib.metadata.version("soulacy")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        version = "unknown"
    return f"soulacy {version} (Python {platform.python_version()})"


def _global_parser(add_help: bool) -> argparse.ArgumentParser:
    parser = (_Parser if add_help else argparse.ArgumentParser)(
        prog="soulacy",
        description="Soulacy: a plugin-based runtime for long-running LLM agents.",
        add_help=add_help,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
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
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        type=_log_level,
        help="print the log records of soulacy's loggers at LEVEL and above to stderr"
        " (debug, info, warning, error, critical; default: $SOULACY_LOG_LEVEL or warning)",
    )
    return parser


LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMAT = "soulacy: %(levelname)s: %(name)s: %(message)s"


def _log_level(value: str) -> int:
    if value.strip().lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a log level (choose from {', '.join(LOG_LEVELS)})"
        )
    level: int = logging.getLevelNamesMapping()[value.strip().upper()]
    return level


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Writes to ``sys.stderr`` as it is at each record, not as it was when made."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@contextmanager
def logging_to_stderr(level: int | None, environ: Mapping[str, str]) -> Iterator[None]:
    """For the block, print the records of the ``soulacy`` loggers at ``level`` and above to
    stderr (the launcher's ``--log-level``, else ``SOULACY_LOG_LEVEL``, else warning).

    Only the ``soulacy`` logger is configured, never the root logger, and it is put back as
    it was afterwards (``main`` may run more than once in a process, as in tests).
    """
    if level is None:
        try:
            level = _log_level(environ.get("SOULACY_LOG_LEVEL") or "warning")
        except argparse.ArgumentTypeError as exc:
            print(f"soulacy: warning: SOULACY_LOG_LEVEL: {exc}; using warning", file=sys.stderr)
            level = logging.WARNING
    logger = logging.getLogger("soulacy")
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _collect_commands(loaded: LoadedPlugins) -> list[CliCommand]:
    commands = loaded.pm.unique_contributions("soulacy_cli_commands", "command")
    for name, (_, plugin) in commands.items():
        words = name.split()
        if not 1 <= len(words) <= 2:
            raise PluginError(f"plugin {plugin!r}: command name {name!r} must be one or two words")
    found = cast("list[CliCommand]", [command for command, _ in commands.values()])
    return sorted(found, key=lambda command: command.name)


def _build_parser(commands: Sequence[CliCommand]) -> argparse.ArgumentParser:
    """The full parser. A bare ``soulacy``, or a bare group (``soulacy config``), prints its
    help (``_help``) and exits 0, as pip, cargo and docker do: nothing was asked amiss."""
    parser = _global_parser(add_help=True)
    parser.set_defaults(_help=parser)
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
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
                holder = singles.get(words[0])
                if holder is None:
                    holder = top.add_parser(words[0], help=f"{words[0]} commands")
                    holder.set_defaults(_help=holder)
                group = holder.add_subparsers(dest=f"{words[0]}_command", metavar="COMMAND")
                groups[words[0]] = group
            sub = group.add_parser(words[1], help=command.help, description=command.help)
        command.configure(sub)
        sub.set_defaults(_run=command.run, _read_only=command.read_only, _help=None)
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of the ``soulacy`` command; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        early, _ = _global_parser(add_help=False).parse_known_args(args_list)
    except SystemExit as exited:  # a bad global option: argparse has printed the usage
        return int(exited.code or 0)
    if early.version:
        print(_version())
        return 0
    with logging_to_stderr(early.log_level, os.environ if environ is None else environ):
        return _main(args_list, early, environ)


def _main(
    args_list: list[str], early: argparse.Namespace, environ: Mapping[str, str] | None
) -> int:
    loaded: LoadedPlugins | None = None
    try:
        loaded = load_plugins(early.workspace, plugins=early.plugins, environ=environ)
        for warning in _unknown_blocks(loaded, early.plugins):
            print(f"soulacy: warning: {warning}", file=sys.stderr)
        if loaded.issues:
            Kernel.from_plugins(loaded)  # raises every problem of config.yaml together
        parser = _build_parser(_collect_commands(loaded))
        try:
            args = parser.parse_args(args_list)
        except SystemExit as exited:  # argparse has printed the usage and the error (or help)
            return int(exited.code or 0)
        if args._help is not None:
            args._help.print_help()
            return 0
        ctx = CliContext(loaded, read_only=args._read_only)
        run: Runner = args._run
        code = trio.run(run, args, ctx) if inspect.iscoroutinefunction(run) else run(args, ctx)
        return int(code or 0)
    except (SoulacyError, BaseExceptionGroup) as raised:
        exc = _soulacy_error(raised)
        if isinstance(exc, ConfigError) and loaded is not None:
            exc = explain_disabled_owners(exc, loaded.pm, early.plugins)
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


def _unknown_blocks(loaded: LoadedPlugins, cli: Sequence[str]) -> list[str]:
    """Warnings for names blocked with ``-p no:NAME`` (or ``plugins.disable``) that name no
    plugin: a typo there silently disables nothing (pytest accepts it silently too)."""
    warnings = []
    from_cli = {value[3:] for value in cli if value.startswith("no:")}
    for name in loaded.pm.blocked_names():
        problem = loaded.pm.unknown_plugin(name)
        if problem:
            where = f"-p no:{name}" if name in from_cli else f"plugins.disable: {name}"
            warnings.append(f"{where}: no plugin named {name!r} to disable; {problem}")
    return warnings


def explain_disabled_owners(
    error: ConfigError, pm: SoulacyPluginManager, cli: Sequence[str] = ()
) -> ConfigError:
    """An "unknown key" that a disabled plugin owns says so, instead of "unknown key"."""
    from_cli = {value[3:] for value in cli if value.startswith("no:")}
    issues, changed = [], False
    for issue in error.issues:
        owner = pm.blocked_owner(issue.path) if issue.message.startswith("unknown key") else None
        if owner is None:
            issues.append(issue)
            continue
        how = f"-p no:{owner}" if owner in from_cli else "plugins.disable"
        message = (
            f"this key belongs to the plugin {owner!r}, which is disabled ({how});"
            " enable the plugin or remove the key"
        )
        issues.append(attrs.evolve(issue, message=message))
        changed = True
    return ConfigError(issues) if changed else error


def _soulacy_error(exc: BaseException) -> Any:
    """The error to report (a SoulacyError, or KeyboardInterrupt for Ctrl-C): itself, or the
    one inside a group raised through a nursery; None for anything else (a bug)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, SoulacyError | KeyboardInterrupt) else None


__all__ = ["CliCommand", "CliContext", "UsageError", "is_workspace", "main"]
