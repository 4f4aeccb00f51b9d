"""The Soulacy kernel: plugins, configuration, services, and the contract of running.

Everything a plugin author needs is exported here; the underscored modules are private. Names
are loaded on first use (PEP 562): ``import soulacy.kernel`` imports nothing else, and
``from soulacy.kernel import hookimpl`` imports only the hook specifications (and pluggy).

To export a name: add it to ``_EXPORTS`` (under the private module that defines it) and to the
``TYPE_CHECKING`` imports as ``from .module import Name as Name``, the form that re-exports it
to type checkers; ``__all__`` is derived from ``_EXPORTS``. tests/kernel/test_exports.py checks
that the two agree and that no other public module exports the name too.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than this module
if TYPE_CHECKING:
    from typing import Any

    from ._commands import KEPT_SHOWN as KEPT_SHOWN
    from ._commands import CliCommand as CliCommand
    from ._commands import CliContext as CliContext
    from ._config import DROP as DROP
    from ._config import ConfigSection as ConfigSection
    from ._config import Keep as Keep
    from ._config import KeptKey as KeptKey
    from ._config import KeyPath as KeyPath
    from ._config import Scope as Scope
    from ._config import Settings as Settings
    from ._config import load_document as load_document
    from ._config import parse_scalar as parse_scalar
    from ._config import structure as structure
    from ._converter import converter as converter
    from ._durations import Duration as Duration
    from ._durations import format_duration as format_duration
    from ._errors import CapacityError as CapacityError
    from ._errors import ConfigError as ConfigError
    from ._errors import ConfigIssue as ConfigIssue
    from ._errors import Location as Location
    from ._errors import PluginError as PluginError
    from ._errors import RunIdInUse as RunIdInUse
    from ._errors import RunNotContinuable as RunNotContinuable
    from ._errors import SoulacyError as SoulacyError
    from ._errors import UsageError as UsageError
    from ._events import Event as Event
    from ._events import EventStream as EventStream
    from ._json import json_encoder as json_encoder
    from ._kernel import DEFAULT_GRACE_PERIOD as DEFAULT_GRACE_PERIOD
    from ._kernel import AgentSpec as AgentSpec
    from ._kernel import Kernel as Kernel
    from ._kernel import Service as Service
    from ._kernel import open_kernel as open_kernel
    from ._lazy import lazy_exports as lazy_exports
    from ._loading import AGENT_FILE as AGENT_FILE
    from ._loading import AGENTS_DIR as AGENTS_DIR
    from ._loading import CONFIG_FILE as CONFIG_FILE
    from ._loading import LoadedPlugins as LoadedPlugins
    from ._loading import PluginsConfig as PluginsConfig
    from ._loading import load_plugins as load_plugins
    from ._manager import BUILTIN_PLUGINS as BUILTIN_PLUGINS
    from ._manager import PluginInfo as PluginInfo
    from ._manager import SoulacyPluginManager as SoulacyPluginManager
    from ._redact import redact as redact
    from ._redact import redact_arguments as redact_arguments
    from ._redact import redact_text as redact_text
    from ._runs import RunHandle as RunHandle
    from ._runs import RunRequest as RunRequest
    from ._runs import RunResult as RunResult
    from ._stash import Stash as Stash
    from ._stash import StashKey as StashKey
    from ._tools import Effects as Effects
    from ._tools import Tool as Tool
    from ._tools import ToolCallContext as ToolCallContext
    from ._tools import current_tool_call as current_tool_call
    from ._tools import file_functions as file_functions
    from .hookspecs import hookimpl as hookimpl
    from .hookspecs import hookspec as hookspec

# The module (relative to this package) that defines each exported name.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "._commands": ("KEPT_SHOWN", "CliCommand", "CliContext"),
    "._converter": ("converter",),
    "._config": (
        "DROP",
        "ConfigSection",
        "Keep",
        "KeptKey",
        "KeyPath",
        "Scope",
        "Settings",
        "load_document",
        "parse_scalar",
        "structure",
    ),
    "._durations": ("Duration", "format_duration"),
    "._errors": (
        "CapacityError",
        "ConfigError",
        "ConfigIssue",
        "Location",
        "PluginError",
        "RunIdInUse",
        "RunNotContinuable",
        "SoulacyError",
        "UsageError",
    ),
    "._events": ("Event", "EventStream"),
    "._json": ("json_encoder",),
    "._kernel": ("DEFAULT_GRACE_PERIOD", "AgentSpec", "Kernel", "Service", "open_kernel"),
    "._loading": (
        "AGENTS_DIR",
        "AGENT_FILE",
        "CONFIG_FILE",
        "LoadedPlugins",
        "PluginsConfig",
        "load_plugins",
    ),
    "._manager": ("BUILTIN_PLUGINS", "PluginInfo", "SoulacyPluginManager"),
    "._lazy": ("lazy_exports",),
    "._redact": ("redact", "redact_arguments", "redact_text"),
    "._runs": ("RunHandle", "RunRequest", "RunResult"),
    "._stash": ("Stash", "StashKey"),
    "._tools": ("Effects", "Tool", "ToolCallContext", "current_tool_call", "file_functions"),
    ".hookspecs": ("hookimpl", "hookspec"),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_HOME)  # type checkers take the names from the TYPE_CHECKING imports


if not TYPE_CHECKING:  # hidden from type checkers, which would type every unknown name Any

    def __getattr__(name: str) -> Any:
        """Import an exported name's module on first use, then keep the name here (PEP 562)."""
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
