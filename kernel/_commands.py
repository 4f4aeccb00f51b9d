"""The contract of a subcommand: what ``soulacy_cli_commands`` returns (:class:`CliCommand`) and
what a command's ``run`` is given (:class:`CliContext`).

The launcher that parses the command line and runs these is not part of the kernel: it is
:mod:`soulacy.cli`, a client of the kernel (decision 0075). This module is on the path of
``soulacy --help``, so it imports nothing of the kernel's runtime, nor attrs, nor argparse
(decisions 0036 and 0038); the kernel loads when a command first asks for it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO, cast

from ._errors import FrozenRecord, PluginError, UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from pathlib import Path

    from ._kernel import Kernel
    from ._loading import LoadedPlugins

    Runner = Callable[[argparse.Namespace, "CliContext"], Any]
    Configure = Callable[[argparse.ArgumentParser], None]

KEPT_SHOWN = 3  # more kept keys than this are summarized in one warning (validate lists all)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """The default ``configure``: the command takes no arguments."""


class CliCommand(FrozenRecord):
    """A subcommand. ``name`` may have two words (``"config set"``) to nest under a group.

    ``run(args, ctx)`` returns an exit code (None means 0); it may be ``async def``, in which
    case the launcher runs it under ``trio.run``. A ``read_only`` command only reads: its kernel
    (``ctx.kernel()``) needs a workspace, and opens stores read-only, creating no file.

    ``run`` and ``configure`` may also be given as ``"package.module:function"`` strings, so
    that a plugin declares its commands without importing what they do: the launcher imports
    ``configure`` only to parse that command's arguments (or print its help) and ``run`` only
    to run it. ``soulacy --help`` then costs no more than the declarations.
    """

    _fields = ("name", "help", "run", "configure", "read_only")
    __slots__ = _fields
    name: str
    help: str
    run: Runner | str
    configure: Configure | str
    read_only: bool

    def __init__(
        self,
        name: str,
        help: str,
        run: Runner | str,
        configure: Configure | str = _no_arguments,
        read_only: bool = False,
    ) -> None:
        self._set(name=name, help=help, run=run, configure=configure, read_only=read_only)

    def runner(self) -> Runner:
        """``run``, imported first if it was declared by name."""
        return cast("Runner", _resolve(self.run))

    def configurer(self) -> Configure:
        """``configure``, imported first if it was declared by name."""
        return cast("Configure", _resolve(self.configure))


def _resolve(target: Callable[..., Any] | str) -> Callable[..., Any]:
    if not isinstance(target, str):
        return target
    module, sep, name = target.partition(":")
    if not sep or not module or not name:
        raise PluginError(f"{target!r} is not a 'package.module:function' reference")
    import importlib

    try:
        value: Any = importlib.import_module(module)
        for part in name.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise PluginError(f"command function {target!r} cannot be imported: {exc}") from exc
    if not callable(value):
        raise PluginError(f"command function {target!r} is not callable")
    return cast("Callable[..., Any]", value)


class CliContext:
    """What a subcommand gets besides its arguments: the kernel (loaded on first use) and output."""

    def __init__(
        self,
        plugins: LoadedPlugins,
        out: TextIO | None = None,
        err: TextIO | None = None,
        inp: TextIO | None = None,
        read_only: bool = False,
        kernel: Kernel | None = None,
    ) -> None:
        self.plugins = plugins
        self.out: TextIO = sys.stdout if out is None else out
        self.err: TextIO = sys.stderr if err is None else err
        self.inp: TextIO = sys.stdin if inp is None else inp
        self.read_only = read_only  # the command's CliCommand.read_only
        self._kernel = kernel

    def __repr__(self) -> str:
        return f"CliContext(root={str(self.plugins.root)!r}, read_only={self.read_only})"

    def kernel(self) -> Kernel:
        if self._kernel is None:
            from ._kernel import Kernel

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
        import json

        print(json.dumps(data, indent=2, sort_keys=True, default=str), file=self.out)

    def warn(self, text: str) -> None:
        print(f"soulacy: warning: {text}", file=self.err)


def is_workspace(folder: Path) -> bool:
    """A workspace is a folder with config.yaml, or with at least one agents/ID/SOUL.yaml."""
    from ._loading import AGENT_FILE, AGENTS_DIR, CONFIG_FILE

    return (folder / CONFIG_FILE).is_file() or any((folder / AGENTS_DIR).glob(f"*/{AGENT_FILE}"))


def require_workspace(folder: Path) -> None:
    from ._loading import AGENT_FILE, AGENTS_DIR, CONFIG_FILE

    if not is_workspace(folder):
        raise UsageError(
            f"{folder} is not a Soulacy workspace: a workspace is a folder with {CONFIG_FILE}"
            f" and/or {AGENTS_DIR}/ID/{AGENT_FILE}; pass --workspace DIR (or set"
            " SOULACY_WORKSPACE), or make this one with `soulacy agents new ID`"
        )
