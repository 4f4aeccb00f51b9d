"""The Soulacy kernel: plugins, configuration, services, and the contract of running.

Everything a plugin author needs is exported here; the underscored modules are private. Names
are loaded on first use (PEP 562): ``import soulacy.kernel`` imports nothing else, and
``from soulacy.kernel import hookimpl`` imports only the hook specifications (and pluggy).

To export a name: add it to ``_EXPORTS`` (under the private module that defines it), to the
``TYPE_CHECKING`` imports (for type checkers) and to ``__all__``; tests/kernel/test_exports.py
checks that the three agree and that no other public module exports the name too.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than this module
if TYPE_CHECKING:
    from typing import Any

    from ._commands import KEPT_SHOWN, CliCommand, CliContext
    from ._config import (
        DROP,
        ConfigSection,
        Keep,
        KeptKey,
        KeyPath,
        Scope,
        Settings,
        load_document,
        parse_scalar,
        structure,
    )
    from ._converter import converter
    from ._durations import Duration, format_duration
    from ._errors import (
        CapacityError,
        ConfigError,
        ConfigIssue,
        Location,
        PluginError,
        RunIdInUse,
        RunNotContinuable,
        SoulacyError,
        UsageError,
    )
    from ._events import Event, EventStream
    from ._json import json_encoder
    from ._kernel import DEFAULT_GRACE_PERIOD, AgentSpec, Kernel, Service, open_kernel
    from ._lazy import lazy_exports
    from ._loading import (
        AGENT_FILE,
        AGENTS_DIR,
        CONFIG_FILE,
        LoadedPlugins,
        PluginsConfig,
        load_plugins,
    )
    from ._manager import BUILTIN_PLUGINS, PluginInfo, SoulacyPluginManager
    from ._redact import redact, redact_arguments, redact_text
    from ._runs import RunHandle, RunRequest, RunResult
    from ._stash import Stash, StashKey
    from ._tools import Effects, Tool, ToolCallContext, current_tool_call, file_functions
    from .hookspecs import hookimpl, hookspec

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

__all__ = [
    "AGENTS_DIR",
    "AGENT_FILE",
    "BUILTIN_PLUGINS",
    "CONFIG_FILE",
    "DEFAULT_GRACE_PERIOD",
    "DROP",
    "KEPT_SHOWN",
    "AgentSpec",
    "CapacityError",
    "CliCommand",
    "CliContext",
    "ConfigError",
    "ConfigIssue",
    "ConfigSection",
    "Duration",
    "Effects",
    "Event",
    "EventStream",
    "Keep",
    "KeptKey",
    "Kernel",
    "KeyPath",
    "LoadedPlugins",
    "Location",
    "PluginError",
    "PluginInfo",
    "PluginsConfig",
    "RunHandle",
    "RunIdInUse",
    "RunNotContinuable",
    "RunRequest",
    "RunResult",
    "Scope",
    "Service",
    "Settings",
    "SoulacyError",
    "SoulacyPluginManager",
    "Stash",
    "StashKey",
    "Tool",
    "ToolCallContext",
    "UsageError",
    "converter",
    "current_tool_call",
    "file_functions",
    "format_duration",
    "hookimpl",
    "hookspec",
    "json_encoder",
    "lazy_exports",
    "load_document",
    "load_plugins",
    "open_kernel",
    "parse_scalar",
    "redact",
    "redact_arguments",
    "redact_text",
    "structure",
]


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
