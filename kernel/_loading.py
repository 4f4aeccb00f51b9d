"""Loading a workspace's plugins, before its configuration is validated: light enough for the
launcher (decision 0038). ``soulacy plugins`` needs no more than this; the kernel, its engine
and trio load when a command builds a kernel (``Kernel.from_plugins``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import attrs

from ._config import ConfigSection, OwnedSection, check_section_owners, load_settings
from ._errors import ConfigError, ConfigIssue, PluginError, UsageError
from ._manager import PluginInfo, PluginSelection, SoulacyPluginManager, enable_tracing, module_name
from ._yamlio import load_yaml_file

CONFIG_FILE = "config.yaml"
AGENT_FILE = "SOUL.yaml"
AGENTS_DIR = "agents"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@attrs.frozen
class PluginsConfig:
    """The ``plugins`` section of config.yaml, read before any other plugin loads."""

    enable: list[str] = attrs.Factory(list)
    disable: list[str] = attrs.Factory(list)


@attrs.frozen
class LoadedPlugins:
    """Plugins loaded for a workspace whose configuration is not validated yet."""

    root: Path
    config_file: Path
    doc: Mapping[str, Any]
    pm: SoulacyPluginManager
    sections: Sequence[OwnedSection]
    environ: Mapping[str, str]
    issues: Sequence[ConfigIssue] = ()  # problems of the plugins section, reported with the rest
    cli_plugins: Sequence[str] = ()  # the -p values it was loaded with


def load_plugins(
    workspace: str | os.PathLike[str] | None = None,
    *,
    plugins: Sequence[str] = (),
    builtins: Iterable[str] | None = None,
    autoload: bool | None = None,
    extra_plugins: Sequence[object] = (),
    environ: Mapping[str, str] | None = None,
    trace: bool | None = None,
) -> LoadedPlugins:
    """Find the workspace and load its plugins in order (see :meth:`Kernel.load`)."""
    env = dict(os.environ if environ is None else environ)
    root = Path(workspace or env.get("SOULACY_WORKSPACE") or Path.cwd()).resolve()
    if not root.is_dir():
        raise UsageError(f"workspace {str(root)!r} is not a folder")
    config_file = root / CONFIG_FILE
    doc = load_yaml_file(config_file)
    issues: list[ConfigIssue] = []
    try:
        selection = _plugin_selection(config_file, doc, plugins, env)
    except ConfigError as exc:
        # Go on with the command line's choice alone, so that every other problem of the
        # file is found too and all are reported together.
        issues, selection = exc.issues, PluginSelection(cli=plugins)
    enable, blocked = selection.resolve()

    pm = SoulacyPluginManager()
    if trace if trace is not None else _truthy(env.get("SOULACY_TRACE_PLUGINS")):
        enable_tracing(pm)
    pm.block(blocked)
    pm.load_builtins(builtins)
    if autoload is None:
        autoload = not _truthy(env.get("SOULACY_DISABLE_PLUGIN_AUTOLOAD"))
    if autoload:
        pm.load_entry_points()
    for name, origin in enable:
        pm.enable(name, origin)
    for index, plugin in enumerate(extra_plugins):
        name = getattr(plugin, "name", None) or f"extra-{index}-{type(plugin).__name__}"
        pm.add(plugin, PluginInfo(str(name), "test", module_name(plugin)))
    pm.load_builtins(builtins, fallbacks=True)  # last: asked after every other plugin
    pm.check_unknown_hooks()
    return LoadedPlugins(
        root, config_file, doc, pm, _collect_sections(pm), env, issues, tuple(plugins)
    )


def _plugin_selection(
    config_file: Path, doc: Mapping[str, Any], cli: Sequence[str], environ: Mapping[str, str]
) -> PluginSelection:
    # The plugins section decides which plugins load, so it is read before any plugin is.
    owned = [OwnedSection(ConfigSection("plugins", PluginsConfig), "core")]
    plugin_env = {k: v for k, v in environ.items() if k.startswith("SOULACY_PLUGINS__")}
    config = load_settings(
        config_file, doc, owned, scope="workspace", environ=plugin_env, check_keys=False
    )
    section: PluginsConfig = config.section("plugins")
    return PluginSelection(section.enable, section.disable, cli)


def _collect_sections(pm: SoulacyPluginManager) -> list[OwnedSection]:
    owned = [
        OwnedSection(section, owner)
        for owner, sections in pm.named_contributions("soulacy_config_sections")
        for section in cast("Sequence[ConfigSection]", sections or ())
    ]
    problems = check_section_owners(owned)
    if problems:
        raise PluginError("; ".join(problems))
    return owned
