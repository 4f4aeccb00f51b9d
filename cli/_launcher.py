"""The ``soulacy`` launcher: global options, then subcommands contributed by plugins.

A client of the kernel, as the HTTP transport is (decision 0075): it reads the commands that
plugins declare through ``soulacy_cli_commands`` (:class:`soulacy.kernel.CliCommand`), parses
the command line, sets up logging and runs the command with a
:class:`soulacy.kernel.CliContext`.

Start-up is part of the interface (decisions 0036 and 0038): this module imports argparse and
the plugin manager, nothing of the kernel's runtime, nor attrs. ``soulacy --help`` (and any
usage error or help of a subcommand) is answered from the commands' declarations, collected
from the plugins that declare commands; the kernel, its configuration and every other plugin
load only once a command is to run.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, cast

from soulacy.kernel import (
    CliCommand,
    CliContext,
    ConfigError,
    PluginError,
    SoulacyError,
    SoulacyPluginManager,
)

# The two names of the plugin manager that only the launcher needs: which builtins declare
# commands (to answer --help without loading the others), and how -p and plugins.* combine.
from soulacy.kernel._manager import COMMAND_PLUGINS, PluginSelection

if TYPE_CHECKING:
    from soulacy.kernel import LoadedPlugins, Scope

# The kernel's file layout, repeated so that the launcher does not import the kernel's loading
# (attrs, the configuration) to find a workspace (tests/kernel/test_startup.py checks that they
# agree).
CONFIG_FILE = "config.yaml"
AGENT_FILE = "SOUL.yaml"
AGENTS_DIR = "agents"


class _Parser(argparse.ArgumentParser):
    """A subcommand's parser reports what it does not know itself, with its own usage (argparse
    leaves unknown arguments to the top-level parser, whose usage says nothing of them).

    A command's parser is configured (its ``configure`` imported and called, its subcommands
    added) only when it is used: when its arguments are parsed or its help printed, never to
    list it in ``soulacy --help``. What configures it waits in :meth:`defer`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: list[Callable[[_Parser], None]] = []
        self._given: list[str] = []  # the arguments this parser was last asked to parse

    def defer(self, step: Callable[[_Parser], None]) -> None:
        """Configure this parser with ``step`` when it is first used."""
        self._pending.append(step)

    def _configured(self) -> None:
        while self._pending:  # a step may defer another (a group, then its members)
            self._pending.pop(0)(self)

    def format_usage(self) -> str:
        self._configured()
        return super().format_usage()

    def format_help(self) -> str:
        self._configured()
        return super().format_help()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._configured()
        self._given = list(args) if args is not None else []
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "soulacy":
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        # Whatever the error ("unrecognized arguments", or "invalid choice" when a global
        # option's value is taken for a subcommand: soulacy runs -w DIR), a global option given
        # after the command gets the hint (issue 38).
        if self.prog != "soulacy" and _GLOBAL_HINT not in message:
            options = {arg.split("=")[0] for arg in self._given}
            if options & _GLOBAL_OPTIONS - set(self._option_string_actions):
                message = f"{message}; {_GLOBAL_HINT}"
        super().error(message)


_GLOBAL_OPTIONS = {"--workspace", "-w", "-p", "--debug", "--log-level", "--version"}
_GLOBAL_HINT = "global options (-w, -p, --debug) go before the command"


def _version() -> str:
    import importlib.metadata
    import platform

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
    import logging

    level: int = logging.getLevelNamesMapping()[value.strip().upper()]
    return level


@contextmanager
def logging_to_stderr(level: int | None, environ: Mapping[str, str]) -> Iterator[None]:
    """For the block, print the records of the ``soulacy`` loggers at ``level`` and above to
    stderr (the launcher's ``--log-level``, else ``SOULACY_LOG_LEVEL``, else warning).

    Only the ``soulacy`` logger is configured, never the root logger, and it is put back as
    it was afterwards (``main`` may run more than once in a process, as in tests). Writes go to
    ``sys.stderr`` as it is at each record, not as it was when the block began.
    """
    import logging  # here, not above: `soulacy --help` logs nothing

    if level is None:
        try:
            level = _log_level(environ.get("SOULACY_LOG_LEVEL") or "warning")
        except argparse.ArgumentTypeError as exc:
            print(f"soulacy: warning: SOULACY_LOG_LEVEL: {exc}; using warning", file=sys.stderr)
            level = logging.WARNING

    class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
        def emit(self, record: logging.LogRecord) -> None:
            self.stream = sys.stderr
            super().emit(record)

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


def _collect_commands(pm: SoulacyPluginManager) -> list[CliCommand]:
    commands = pm.unique_contributions("soulacy_cli_commands", "command")
    for name, (_, plugin) in commands.items():
        words = name.split()
        if not 1 <= len(words) <= 2:
            raise PluginError(f"plugin {plugin!r}: command name {name!r} must be one or two words")
    found = cast("list[CliCommand]", [command for command, _ in commands.values()])
    return sorted(found, key=lambda command: command.name)


def _build_parser(commands: Sequence[CliCommand]) -> argparse.ArgumentParser:
    """The full parser. A bare ``soulacy``, or a bare group (``soulacy config``), prints its
    help (``_help``) and exits 0, as pip, cargo and docker do: nothing was asked amiss.

    Each command's parser is configured when it is used (``_Parser.defer``), so that listing
    the commands imports none of them."""
    parser = _global_parser(add_help=True)
    parser.set_defaults(_help=parser)
    top = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # By first word, in the order of the sorted names ("runs" comes before "runs show"): the
    # one-word command, if any, and the two-word ones under it.
    singles: dict[str, CliCommand | None] = {}
    groups: dict[str, list[tuple[str, CliCommand]]] = {}
    for command in commands:
        words = command.name.split()
        singles.setdefault(words[0], None)
        if len(words) == 1:
            singles[words[0]] = command
        else:
            groups.setdefault(words[0], []).append((words[1], command))
    for word, single in singles.items():
        if single is not None:
            sub = top.add_parser(word, help=single.help, description=single.help)
            _declare(sub, single)
        else:
            sub = top.add_parser(word, help=f"{word} commands")
            sub.set_defaults(_help=sub)
        if groups.get(word):
            # "runs show" under "runs": the bare group runs the one-word command, if any. The
            # group's own arguments come before its subcommands: they are deferred after them.
            sub.defer(functools.partial(_add_group, word=word, members=groups[word]))
    return parser


def _add_group(sub: _Parser, *, word: str, members: Sequence[tuple[str, CliCommand]]) -> None:
    group = sub.add_subparsers(dest=f"{word}_command", metavar="COMMAND", parser_class=_Parser)
    for name, member in members:
        _declare(group.add_parser(name, help=member.help, description=member.help), member)


def _declare(sub: _Parser, command: CliCommand) -> None:
    sub.set_defaults(_command=command, _help=None)

    def configure(parser: _Parser) -> None:  # its module imported only now
        command.configurer()(parser)

    sub.defer(configure)


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
    launch = _Launch(args_list, early, environ)
    try:
        # First from the declarations alone: help and usage errors need no kernel, no logging.
        declared = declared_commands(early, environ)
        if declared is not None:
            parsed = _parse(_build_parser(declared), args_list)
            if isinstance(parsed, int):
                return parsed
        with logging_to_stderr(early.log_level, os.environ if environ is None else environ):
            return launch.run(warn=declared is None)
    except (SoulacyError, BaseExceptionGroup) as raised:
        return launch.report(raised)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `soulacy … | head`: the reader left; that is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _parse(parser: argparse.ArgumentParser, args_list: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit code when argparse has answered (help, usage error)
    or the command line names no command (then its help is printed)."""
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exited:  # argparse has printed the usage and the error (or help)
        return int(exited.code or 0)
    if args._help is not None:
        args._help.print_help()
        return 0
    return args


class _Launch:
    """One command line, once it is to run: every plugin loaded, then the command."""

    def __init__(
        self, args_list: list[str], early: argparse.Namespace, environ: Mapping[str, str] | None
    ) -> None:
        self.args_list, self.early, self.environ = args_list, early, environ
        self.loaded: LoadedPlugins | None = None

    def run(self, warn: bool) -> int:
        from soulacy.kernel import load_plugins

        early = self.early
        loaded = load_plugins(early.workspace, plugins=early.plugins, environ=self.environ)
        self.loaded = loaded
        if warn:  # (declared_commands has warned already when it ran)
            for warning in _unknown_blocks(loaded.pm, early.plugins):
                print(f"soulacy: warning: {warning}", file=sys.stderr)
        if loaded.issues:
            from soulacy.kernel import Kernel

            Kernel.from_plugins(loaded)  # raises every problem of config.yaml together
        parsed = _parse(_build_parser(_collect_commands(loaded.pm)), self.args_list)
        if isinstance(parsed, int):
            return parsed
        command: CliCommand = parsed._command
        ctx = CliContext(loaded, read_only=command.read_only)
        run = command.runner()
        import inspect

        if inspect.iscoroutinefunction(run):
            import trio

            return int(trio.run(run, parsed, ctx) or 0)
        return int(run(parsed, ctx) or 0)

    def report(self, raised: BaseException) -> int:
        """Print a SoulacyError (or one raised through a nursery) and return its exit code;
        re-raise anything else, which is a bug."""
        exc = _soulacy_error(raised)
        if isinstance(exc, ConfigError) and self.loaded is not None:
            exc = explain_disabled_owners(exc, self.loaded.pm, self.early.plugins)
        if isinstance(exc, KeyboardInterrupt):
            return 130
        if exc is None:
            raise raised
        if self.early.debug:
            import traceback

            traceback.print_exception(raised)
        print(f"soulacy: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def declared_commands(
    early: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> list[CliCommand] | None:
    """Every command, collected from the plugins that declare commands only: the builtins in
    ``COMMAND_PLUGINS``, the installed plugins and those named with ``-p`` (decision 0036).

    That is the list that loading every plugin gives when config.yaml cannot change which
    plugins load. Otherwise (config.yaml mentions ``plugins``, a ``SOULACY_PLUGINS__*``
    variable is set, hook tracing is on, the workspace is not a folder) returns None, and the
    launcher loads everything first, as it does to run a command.
    """
    env = os.environ if environ is None else environ
    if _truthy(env.get("SOULACY_TRACE_PLUGINS")):
        return None
    if any(key.startswith("SOULACY_PLUGINS__") for key in env):
        return None
    root = early.workspace or env.get("SOULACY_WORKSPACE") or os.getcwd()
    if not os.path.isdir(root):
        return None  # loading reports it
    try:
        # Not parsed: a file that never says "plugins" has no plugins section.
        with open(os.path.join(root, CONFIG_FILE), "rb") as file:
            if b"plugins" in file.read():
                return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    enable, blocked = PluginSelection(cli=early.plugins).resolve()
    pm = SoulacyPluginManager()
    pm.block(blocked)
    pm.load_builtins(COMMAND_PLUGINS)
    if not _truthy(env.get("SOULACY_DISABLE_PLUGIN_AUTOLOAD")):
        pm.load_entry_points()
    for name, origin in enable:
        pm.enable(name, origin)
    for warning in _unknown_blocks(pm, early.plugins):
        print(f"soulacy: warning: {warning}", file=sys.stderr)
    return _collect_commands(pm)


def _unknown_blocks(pm: SoulacyPluginManager, cli: Sequence[str]) -> list[str]:
    """Warnings for names blocked with ``-p no:NAME`` (or ``plugins.disable``) that name no
    plugin: a typo there silently disables nothing (pytest accepts it silently too)."""
    warnings = []
    from_cli = {value[3:] for value in cli if value.startswith("no:")}
    for name in pm.blocked_names():
        problem = pm.unknown_plugin(name)
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
        in_agent = os.path.basename(issue.location.file) == AGENT_FILE
        scope: Scope = "agent" if in_agent else "workspace"
        unknown = issue.message.startswith("unknown key")
        owner = pm.blocked_owner(issue.path, scope) if unknown else None
        if owner is None:
            issues.append(issue)
            continue
        how = f"-p no:{owner}" if owner in from_cli else "plugins.disable"
        message = (
            f"this key belongs to the plugin {owner!r}, which is disabled ({how});"
            " enable the plugin or remove the key"
        )
        issues.append(issue.replace(message=message))
        changed = True
    return ConfigError(issues) if changed else error


def _soulacy_error(exc: BaseException) -> Any:
    """The error to report (a SoulacyError, or KeyboardInterrupt for Ctrl-C): itself, or the
    one inside a group raised through a nursery; None for anything else (a bug)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, SoulacyError | KeyboardInterrupt) else None


__all__ = ["main"]
