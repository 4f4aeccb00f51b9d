"""The essential builtin ``core`` plugin: the core agent keys and the kernel's own subcommands.

It is written exactly like any other plugin, through the same hooks, and cannot be blocked
(``-p no:core`` is an error): it declares the ``plugins`` section, the agent keys every run
reads (``id``, ``name``, ``description``, ``system_prompt``, ``llm``, ``tools``, ``enabled``),
saves config.yaml (``soulacy_save_config``, with :mod:`soulacy.plugins.yamledit`) and the
subcommands ``serve``, ``plugins``, ``config show|get|set|validate``, ``run``,
``demo``, ``plugin new``, ``agents list|new``, ``history``, ``runs``, ``runs show``,
``runs continue`` and ``runs cancel``.

The provider configuration (``llm.default``, ``llm.providers``) and the model capacity are the
builtin ``providers`` plugin's (:mod:`soulacy.plugins.providers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import CliCommand, hookimpl, lazy_exports

from ._args import (
    _configure_cancel,
    _configure_continue,
    _configure_demo,
    _configure_get,
    _configure_history,
    _configure_new,
    _configure_plugin_new,
    _configure_run,
    _configure_runs,
    _configure_serve,
    _configure_set,
    _configure_show,
    _json_flag,
)

if TYPE_CHECKING:
    from soulacy.kernel import ConfigSection, Kernel

    from ._commands import new_agent
    from ._run import RUN_EXIT_CODES
    from ._settings import AgentLLM

__all__ = [
    "RUN_EXIT_CODES",
    "AgentLLM",
    "new_agent",
]

# What the commands do is imported when one runs (decision 0036): by name, not by value.
_COMMANDS = "soulacy.plugins.core._commands:"
_RUN = "soulacy.plugins.core._run:"
_VALIDATE = "soulacy.plugins.core._validate:"
_LAZY = {
    "RUN_EXIT_CODES": "._run",
    "new_agent": "._commands",
    "AgentLLM": "._settings",
}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection, PluginsConfig

    from ._settings import AgentLLM

    return [
        ConfigSection("plugins", PluginsConfig, doc="plugins to enable and disable"),
        ConfigSection("id", str | None, scope="agent", doc="the agent's id (its folder name)"),
        ConfigSection("name", str | None, scope="agent"),
        ConfigSection("description", str | None, scope="agent"),
        ConfigSection("system_prompt", str | None, scope="agent"),
        ConfigSection("llm", AgentLLM, scope="agent"),
        ConfigSection("tools", list[str], scope="agent", default=list),
        ConfigSection("enabled", bool, scope="agent", default=True),
    ]


@hookimpl
def soulacy_save_config(kernel: Kernel, changes: Mapping[str, Any]) -> list[str]:
    from soulacy.plugins.yamledit import save_config_changes

    return save_config_changes(kernel, changes)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "serve",
            "run the kernel and its services (the HTTP API, the portal) until SIGINT or SIGTERM",
            _RUN + "_serve",
            _configure_serve,
        ),
        CliCommand(
            "plugins",
            "list loaded plugins and the hooks they implement",
            _COMMANDS + "_plugins",
            _json_flag,
        ),
        CliCommand(
            "config show",
            "print the effective configuration",
            _COMMANDS + "_config_show",
            _json_flag,
        ),
        CliCommand(
            "config get", "print one configuration value", _COMMANDS + "_config_get", _configure_get
        ),
        CliCommand(
            "config set",
            "change one value of config.yaml (validated, atomic)",
            _COMMANDS + "_config_set",
            _configure_set,
        ),
        CliCommand(
            "config validate",
            "check config.yaml, every SOUL.yaml, and each agent's provider, tools and MCP servers",
            _VALIDATE + "_config_validate",
        ),
        CliCommand(
            "run",
            "run one request of a conversation and print the reply",
            _RUN + "_run",
            _configure_run,
        ),
        CliCommand(
            "demo",
            "run the demo agent on the scripted model (no network, no key)",
            _RUN + "_demo",
            _configure_demo,
        ),
        CliCommand(
            "plugin new",
            "start a plugin project from the plugin template",
            _COMMANDS + "_plugin_new",
            _configure_plugin_new,
        ),
        CliCommand(
            "agents list", "list the workspace's agents", _COMMANDS + "_agents_list", _json_flag
        ),
        CliCommand(
            "history",
            "a conversation's stored messages with their reply metadata",
            _COMMANDS + "_history",
            _configure_history,
            read_only=True,
        ),
        CliCommand(
            "runs",
            "recent runs and how they ended",
            _COMMANDS + "_runs",
            _configure_runs,
            read_only=True,
        ),
        CliCommand(
            "runs show",
            "one run: metadata and proof",
            _COMMANDS + "_run_show",
            _configure_show,
            read_only=True,
        ),
        CliCommand(
            "runs continue",
            "continue a run that ended incomplete, in place, with more turns or time",
            _RUN + "_continue",
            _configure_continue,
        ),
        CliCommand(
            "runs cancel",
            "cancel a run, in whichever process sharing the store runs it",
            _COMMANDS + "_run_cancel",
            _configure_cancel,
        ),
        CliCommand(
            "agents new",
            "create agents/ID/SOUL.yaml that inherits the workspace policy",
            _COMMANDS + "_agents_new",
            _configure_new,
        ),
    ]
