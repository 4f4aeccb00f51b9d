"""The Soulacy kernel: plugins, configuration, services and the run engine's hooks.

Everything a plugin author needs is re-exported here; the underscored modules are private.
"""

from __future__ import annotations

from ._cli import CliCommand, CliContext
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
from ._durations import Duration, format_duration
from ._engine import RunRequest, RunResult
from ._errors import (
    CapacityError,
    ConfigError,
    ConfigIssue,
    Location,
    PluginError,
    RunIdInUse,
    SoulacyError,
    UsageError,
)
from ._events import Event, EventStream
from ._kernel import AgentSpec, Kernel, LoadedPlugins, Service, load_plugins, open_kernel
from ._manager import BUILTIN_PLUGINS, PluginInfo, SoulacyPluginManager
from ._redact import redact, redact_text
from ._tools import Tool
from .hookspecs import hookimpl, hookspec

__all__ = [
    "BUILTIN_PLUGINS",
    "DROP",
    "AgentSpec",
    "CapacityError",
    "CliCommand",
    "CliContext",
    "ConfigError",
    "ConfigIssue",
    "ConfigSection",
    "Duration",
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
    "RunIdInUse",
    "RunRequest",
    "RunResult",
    "Scope",
    "Service",
    "Settings",
    "SoulacyError",
    "SoulacyPluginManager",
    "Tool",
    "UsageError",
    "format_duration",
    "hookimpl",
    "hookspec",
    "load_document",
    "load_plugins",
    "open_kernel",
    "parse_scalar",
    "redact",
    "redact_text",
    "structure",
]
