"""The plugin manager: which plugins load, in what order, and what goes wrong when they don't.

Load order (later steps win): builtin plugins -> entry points of the group ``soulacy`` ->
``plugins: {enable, disable}`` in config.yaml -> ``-p NAME`` / ``-p no:NAME`` on the command line
-> a check that every ``soulacy_*`` implementation matches a known hook.

First-result precedence (docs/decisions/0018-first-result-precedence.md): the builtins are the
defaults. A plugin that is only *installed* (autoloaded from its entry point) answers a
first-result hook after the builtins, unless its implementation says ``tryfirst=True`` or the
builtin is disabled; a plugin *asked for* (``-p NAME``, ``plugins.enable``, or registered by
code) answers before them, as pluggy orders later registrations.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from ._errors import FrozenRecord, PluginError

if TYPE_CHECKING:
    import importlib.metadata

    from ._config import Scope

# importlib.metadata (≈ 4x the start of a bare interpreter: email, zipfile, csv …) and
# importlib.util are imported where entry points are read, not here: `soulacy --help` reads
# none when no installed distribution declares the group (see may_have_entry_points).

ENTRY_POINT_GROUP = "soulacy"
HOOK_PREFIX = "soulacy_"

# The first-party plugins that load by default: (name, module). One list, in one place.
BUILTIN_PLUGINS: tuple[tuple[str, str], ...] = (
    ("core", "soulacy.plugins.core"),
    ("engine", "soulacy.plugins.engine"),
    ("policy", "soulacy.plugins.policy"),
    ("progress", "soulacy.plugins.progress"),
    ("compaction", "soulacy.plugins.compaction"),
    ("sqlite_store", "soulacy.plugins.sqlite_store"),
    ("workflows", "soulacy.plugins.workflows"),
    ("http", "soulacy.plugins.http"),
    ("portal", "soulacy.plugins.portal"),
    ("scheduler", "soulacy.plugins.scheduler"),
    ("retention", "soulacy.plugins.retention"),
    ("mcp", "soulacy.plugins.mcp"),
    ("mcp_server", "soulacy.plugins.mcp_server"),
    ("a2a", "soulacy.plugins.a2a"),
    ("agui", "soulacy.plugins.agui"),
    ("costs", "soulacy.plugins.costs"),
    ("reasoning", "soulacy.plugins.reasoning"),
    ("studio", "soulacy.plugins.studio"),
    ("providers", "soulacy.plugins.providers"),
    ("scripted", "soulacy.plugins.scripted"),
    ("openai", "soulacy.plugins.openai"),
    ("approvals", "soulacy.plugins.approvals"),
    # Defaults that answer trylast: a plugin that answers the same hook replaces them.
    ("classic", "soulacy.plugins.classic"),
    ("file_tools", "soulacy.plugins.file_tools"),
    ("memory_store", "soulacy.plugins.memory_store"),
    ("passthrough", "soulacy.plugins.compaction.passthrough"),
    # Last: it only declares the original system's keys that no other plugin implements.
    ("original_format", "soulacy.plugins.original_format"),
)
# Builtins that are last resorts (each answers its hooks trylast): registered after every other
# plugin, installed ones included, so that pluggy calls them last of all (it calls the trylast
# implementations registered first, last) and an installed replacement is asked before them.
FALLBACK_PLUGINS = frozenset({"classic", "file_tools", "memory_store", "passthrough"})
# Plugins the kernel cannot work without; they cannot be disabled.
ESSENTIAL_PLUGINS = frozenset({"core", "engine"})
# The builtins that implement ``soulacy_cli_commands``: to list the commands (``soulacy
# --help``), the launcher imports these, not every builtin (decision 0036).
# tests/kernel/test_startup.py checks the set against the hooks each builtin implements.
COMMAND_PLUGINS = frozenset(
    {"core", "policy", "workflows", "scheduler", "studio", "approvals", "mcp", "mcp_server"}
)


class PluginInfo(FrozenRecord):
    """What ``soulacy plugins`` shows about one registered plugin."""

    _fields = ("name", "origin", "module", "distribution", "version")
    __slots__ = _fields
    name: str
    origin: str  # "builtin", "entry point", "config.yaml", "command line" or "test"
    module: str
    distribution: str | None
    version: str | None

    def __init__(
        self,
        name: str,
        origin: str,
        module: str,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        self._set(
            name=name, origin=origin, module=module, distribution=distribution, version=version
        )

    def as_dict(self) -> dict[str, str | None]:
        return dict(zip(self._fields, self._values(), strict=True))


class PluginSelection(FrozenRecord):
    """Names enabled and disabled by config.yaml and by the command line (``-p`` options)."""

    _fields = ("config_enable", "config_disable", "cli")
    __slots__ = _fields
    config_enable: Sequence[str]
    config_disable: Sequence[str]
    cli: Sequence[str]  # raw -p values: "NAME" or "no:NAME"

    def __init__(
        self,
        config_enable: Sequence[str] = (),
        config_disable: Sequence[str] = (),
        cli: Sequence[str] = (),
    ) -> None:
        self._set(config_enable=config_enable, config_disable=config_disable, cli=cli)

    def resolve(self) -> tuple[list[tuple[str, str]], set[str]]:
        """Return (names to enable with their origin, names to block); the command line wins."""
        cli_enable = [v for v in self.cli if not v.startswith("no:")]
        cli_block = {v[3:] for v in self.cli if v.startswith("no:")}
        blocked = (set(self.config_disable) - set(cli_enable)) | cli_block
        enable = [(n, "config.yaml") for n in self.config_enable if n not in blocked]
        enable += [(n, "command line") for n in cli_enable]
        return enable, blocked


class SoulacyPluginManager(pluggy.PluginManager):
    """One per :class:`Kernel`; there is no module-level global manager."""

    def __init__(self) -> None:
        super().__init__("soulacy")
        self.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        # Plugins registered because they are installed (autoloaded), not asked for: their
        # first-result implementations without tryfirst answer after the builtins.
        self.autoloaded: set[str] = set()
        self._registering_autoloaded = False
        # Counted through pluggy's public methods, so that what hot paths ask ("does a call
        # of this hook reach anyone?") is answered again only when the answer can change.
        self.generation = 0  # registrations and unregistrations so far
        self.monitors = 0  # hook call monitors (tracing, HookRecorder) in place
        self.hook.soulacy_addhooks.call_historic(kwargs={"pluginmanager": self})

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        self.generation += 1
        return registered

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        found = super().unregister(plugin, name)
        self.generation += 1
        return found

    def add_hookcall_monitoring(self, before: Any, after: Any) -> Callable[[], None]:
        undo = super().add_hookcall_monitoring(before, after)
        self.monitors += 1
        self.generation += 1

        def undo_and_count() -> None:
            undo()
            self.monitors -= 1
            self.generation += 1

        return undo_and_count

    def heard(self, name: str) -> bool:
        """Whether a call of hook ``name`` now reaches anyone: an implementation, or a monitor
        (tracing, ``HookRecorder``), which sees every call, even one no plugin implements."""
        return self.monitors > 0 or bool(getattr(self.hook, name).get_hookimpls())

    def call_unrecorded(self, name: str, **kwargs: Any) -> None:
        """Call every implementation of a historic hook, in pluggy's order, without adding the
        call to the hook's history (a sibling kernel's ``soulacy_configure``). Wrappers do not
        apply: no hook of the kind this serves has any."""
        for impl in reversed(getattr(self.hook, name).get_hookimpls()):
            if not (impl.wrapper or impl.hookwrapper):
                impl.function(*[kwargs[arg] for arg in impl.argnames])

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        # As in pytest: a function named soulacy_* is a hook implementation even undecorated.
        opts: Any = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith(HOOK_PREFIX):
            method = getattr(plugin, name, None)
            if callable(method) and not isinstance(method, type):
                opts = {}
        if opts is not None and self._registering_autoloaded:
            opts = self._after_builtins(name, opts)
        return opts

    def _after_builtins(self, name: str, opts: Any) -> Any:
        """An installed plugin's first-result implementation answers after the builtins'
        unless it says ``tryfirst=True`` (or is a wrapper, which sees every answer)."""
        caller = getattr(self.hook, opts.get("specname") or name, None)
        spec = getattr(caller, "spec", None)
        if spec is None or not spec.opts.get("firstresult"):
            return opts
        if opts.get("tryfirst") or opts.get("wrapper") or opts.get("hookwrapper"):
            return opts
        return {**opts, "trylast": True}

    # -- registration ------------------------------------------------------------------------

    def add(self, plugin: Any, info: PluginInfo, *, autoloaded: bool = False) -> None:
        """Register ``plugin`` under ``info.name``; a mismatched hook is a PluginError.

        ``autoloaded``: registered because it is installed, not because it was asked for (its
        first-result implementations answer after the builtins', unless ``tryfirst``).
        """
        if self.is_blocked(info.name) or self.has_plugin(info.name):
            return
        self._registering_autoloaded = autoloaded
        try:
            self.register(plugin, name=info.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            message = " ".join(str(exc).split())
            raise PluginError(
                f"plugin {info.name!r} ({info.module}) is invalid: {message}"
            ) from None
        finally:
            self._registering_autoloaded = False
        self.infos[info.name] = info
        if autoloaded:
            self.autoloaded.add(info.name)

    def load_builtins(self, only: Iterable[str] | None = None, *, fallbacks: bool = False) -> None:
        """Register the builtins (``only`` those, if given); ``fallbacks=True`` registers the
        last-resort ones (:data:`FALLBACK_PLUGINS`), which go after every other plugin."""
        wanted = None if only is None else set(only) | ESSENTIAL_PLUGINS
        for name, module in BUILTIN_PLUGINS:
            if (name in FALLBACK_PLUGINS) != fallbacks:
                continue
            if (wanted is None or name in wanted) and not self.is_blocked(name):
                self.add(_import(module, name, "builtin"), PluginInfo(name, "builtin", module))

    def load_entry_points(self) -> None:
        """Register every installed plugin (autoloading)."""
        if not may_have_entry_points():
            return
        import importlib.metadata

        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            self._load_entry_point(ep, autoloaded=True)

    def _load_entry_point(self, ep: importlib.metadata.EntryPoint, autoloaded: bool) -> None:
        if self.is_blocked(ep.name) or self.has_plugin(ep.name):
            return
        dist = ep.dist
        dist_name = dist.metadata["Name"] if dist is not None else None
        version = dist.version if dist is not None else None
        where = f"entry point {ep.name} = {ep.value}"
        if dist_name:
            where += f" of distribution {dist_name} {version}"
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(
                f"plugin {ep.name!r} ({where}) failed to import: {_one_line(exc)}"
            ) from exc
        info = PluginInfo(ep.name, "entry point", ep.value, dist_name, version)
        self.add(plugin, info, autoloaded=autoloaded)

    def enable(self, name: str, origin: str) -> None:
        """Register a plugin named on the command line or in config.yaml.

        ``name`` is a builtin plugin's name, an entry point's name, or an importable module.
        An installed plugin that was autoloaded is registered again as asked for.
        """
        if name in self.autoloaded:
            self.autoloaded.discard(name)
            self.unregister(name=name)
            del self.infos[name]
        if self.has_plugin(name):
            return
        builtin = dict(BUILTIN_PLUGINS).get(name)
        if builtin is not None:
            self.add(_import(builtin, name, origin), PluginInfo(name, "builtin", builtin))
            return
        import importlib.metadata

        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
            self._load_entry_point(ep, autoloaded=False)
            return
        self.add(_import(name, name, origin), PluginInfo(name, origin, name))

    def block(self, names: Iterable[str]) -> None:
        aliases = {module: name for name, module in BUILTIN_PLUGINS}
        for name in names:
            canonical = aliases.get(name, name)
            if canonical in ESSENTIAL_PLUGINS:
                raise PluginError(f"plugin {canonical!r} is essential and cannot be disabled")
            self.set_blocked(canonical)

    def check_unknown_hooks(self) -> None:
        """Every ``soulacy_*`` implementation must match a hook specification."""
        known = [
            name
            for name in dir(self.hook)
            if name.startswith(HOOK_PREFIX) and getattr(self.hook, name).spec is not None
        ]
        problems = []
        for name in dir(self.hook):
            caller = getattr(self.hook, name)
            if not name.startswith(HOOK_PREFIX) or caller.spec is not None:
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                import difflib

                close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                problems.append(
                    f"plugin {impl.plugin_name!r} implements unknown hook {name!r}{hint}"
                )
        if problems:
            raise PluginError("; ".join(problems))

    def describe(self) -> list[dict[str, Any]]:
        """Name, origin, distribution, version and implemented hooks of every plugin, and the
        first-result hooks it answers first (``answers``)."""
        first = {hook: order[0] for hook, order in self.first_result_order().items() if order}
        out = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:
                continue
            info = self.infos.get(name) or PluginInfo(name, "registered", module_name(plugin))
            hooks = sorted(impl.name for impl in (self.get_hookcallers(plugin) or []))
            answers = sorted(hook for hook, who in first.items() if who == name)
            out.append({**info.as_dict(), "hooks": hooks, "answers": answers})
        return out

    # -- collected hooks ---------------------------------------------------------------------

    def plugin_callers(self, hook: str) -> list[tuple[str, Callable[..., list[Any]]]]:
        """(plugin name, a caller of that plugin's implementations alone) for each plugin that
        implements ``hook``, in the order pluggy keeps them (registration order, ``tryfirst``
        and ``trylast`` applied).

        Each caller is pluggy's ``subset_hook_caller`` without the other implementing plugins:
        the manager's hook execution, so tracing and hook-call monitoring see it and the
        plugin's own wrappers apply. (It keeps plugins in a set: a plugin object must be
        hashable, as modules and plain instances are.)
        """
        order: dict[int, Any] = {}
        for impl in getattr(self.hook, hook).get_hookimpls():
            order.setdefault(id(impl.plugin), impl.plugin)
        plugins = list(order.values())
        return [
            (
                self.get_name(plugin) or module_name(plugin),
                self.subset_hook_caller(hook, [p for p in plugins if p is not plugin]),
            )
            for plugin in plugins
        ]

    def named_contributions(self, hook: str, /, **kwargs: Any) -> list[tuple[str, Any]]:
        """(plugin name, answer) of each plugin implementing a collected hook, so that a
        contribution can name its plugin. Each plugin's implementations are called through
        pluggy (:meth:`plugin_callers`), never as bare functions."""
        return [
            (name, answer) for name, call in self.plugin_callers(hook) for answer in call(**kwargs)
        ]

    def unique_contributions(
        self, hook: str, what: str, /, **kwargs: Any
    ) -> dict[str, tuple[Any, str]]:
        """Collect a hook whose answers are named things: each plugin answers a mapping of name
        to thing, or a sequence of things that have a ``name``. Returns name -> (thing, plugin
        name); a name that two plugins contribute is a PluginError naming both (``what`` says
        what the thing is: "plugins 'a' and 'b' both define the command 'run'")."""
        found: dict[str, tuple[Any, str]] = {}
        for plugin, answer in self.named_contributions(hook, **kwargs):
            if isinstance(answer, Mapping):
                items = list(answer.items())
            else:
                items = [(thing.name, thing) for thing in answer or ()]
            for name, thing in items:
                if name in found:
                    raise PluginError(
                        f"plugins {found[name][1]!r} and {plugin!r} both define the {what} {name!r}"
                    )
                found[name] = (thing, plugin)
        return found

    # -- first-result hooks ----------------------------------------------------------------------

    def first_result_order(self) -> dict[str, list[str]]:
        """Each implemented first-result hook: its plugins in the order they are asked (the
        first non-None answer wins). Wrappers, which see every answer, are not listed."""
        order: dict[str, list[str]] = {}
        for name in sorted(dir(self.hook)):
            caller = getattr(self.hook, name)
            spec = getattr(caller, "spec", None)
            if not name.startswith(HOOK_PREFIX) or spec is None:
                continue
            if not spec.opts.get("firstresult"):
                continue
            impls = [i for i in caller.get_hookimpls() if not (i.wrapper or i.hookwrapper)]
            if impls:
                order[name] = [impl.plugin_name for impl in reversed(impls)]  # pluggy's order
        return order

    def first_result(self, hook: str, **kwargs: Any) -> tuple[Any, str | None]:
        """Call a first-result hook as pluggy does and say which plugin answered: (answer,
        plugin name), or (None, None) when none did. Wrappers are left out; use the hook
        relay for a call that they must see."""
        caller = getattr(self.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            if impl.wrapper or impl.hookwrapper:
                continue
            answer = impl.function(*(kwargs[arg] for arg in impl.argnames))
            if answer is not None:
                return answer, impl.plugin_name
        return None, None

    # -- blocked plugins ---------------------------------------------------------------------------

    def blocked_names(self) -> list[str]:
        return [name for name, plugin in self.list_name_plugin() if plugin is None]

    def known_names(self) -> list[str]:
        """Every plugin name this manager could load: builtins, installed entry points, and
        what is registered."""
        names = dict.fromkeys(name for name, _ in BUILTIN_PLUGINS)
        if may_have_entry_points():
            names.update(dict.fromkeys(ep.name for ep in _entry_points()))
        names.update(dict.fromkeys(n for n, p in self.list_name_plugin() if p is not None))
        return list(names)

    def unknown_plugin(self, name: str) -> str | None:
        """None when ``name`` names a plugin (or an importable module); else what to say."""
        if name in dict(BUILTIN_PLUGINS):
            return None
        known = self.known_names()
        if name in known or name in dict(BUILTIN_PLUGINS).values() or _importable(name):
            return None
        import difflib

        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]!r}?"
        return f"known: {', '.join(known)}"

    def blocked_owner(self, key: str, scope: Scope = "workspace") -> str | None:
        """The disabled plugin that owns the dotted config ``key`` of a ``scope`` file
        (config.yaml, or a SOUL.yaml for ``"agent"``), if one does: a builtin by the sections it
        declares there (a declaration such as ``ConfigSection.trust_root`` owns no key), another
        plugin when the key's first word is its name."""
        top = key.split(".")[0]
        for name in self.blocked_names():
            if top == name:
                return name
            module = dict(BUILTIN_PLUGINS).get(name)
            if module is None and "." in name and _importable(name):
                module = name  # a plugin enabled by its module (soulacy.contrib.postgres)
            if module is None:
                continue
            sections = getattr(_import(module, name, "builtin"), "soulacy_config_sections", None)
            for section in sections() if callable(sections) else ():
                if not section.owns or section.scope != scope:
                    continue
                owned = section.key
                if key == owned or key.startswith(f"{owned}.") or owned.startswith(f"{key}."):
                    return name
        return None


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    import importlib.metadata

    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def may_have_entry_points(path: Sequence[str] | None = None) -> bool:
    """False only when no distribution on ``path`` (``sys.path``) can declare an entry point of
    the group ``soulacy``: no ``entry_points.txt`` of a ``*.dist-info`` or ``*.egg-info`` folder
    there mentions ``[soulacy]``. True when one does, or when it cannot tell cheaply (a zip or
    egg file on the path, an unreadable folder); then importlib.metadata decides.

    importlib.metadata finds distributions the same way (a folder per distribution on the
    path), but importing it costs about four times the start of a bare interpreter, so a
    launcher with no installed plugins does not pay for it (decision 0036).
    """
    marker = f"[{ENTRY_POINT_GROUP}]"
    for entry in sys.path if path is None else path:
        folder = entry or "."
        try:
            with os.scandir(folder) as found:
                names = [e.name for e in found]
        except NotADirectoryError:
            return True  # a zip archive on the path: let importlib.metadata read it
        except OSError:
            continue  # a missing folder holds no distribution (importlib.metadata agrees)
        for name in names:
            if name.endswith((".egg", ".egg-link")):
                return True
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as file:
                    if marker.encode() in file.read():
                        return True
            except FileNotFoundError:
                continue
            except OSError:
                return True
    return False


def _importable(name: str) -> bool:
    # A dotted module's parent packages are imported to find it: a name the user wrote as a
    # plugin (``-p no:soulacy.contrib.postgres``), so a module meant to be loaded anyway.
    if not all(part.isidentifier() for part in name.split(".")):
        return False
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def module_name(plugin: Any) -> str:
    if isinstance(plugin, ModuleType):
        return plugin.__name__
    return f"{type(plugin).__module__}.{type(plugin).__qualname__}"


def _one_line(exc: BaseException) -> str:
    return " ".join(traceback.format_exception_only(exc)[-1].split())


def _import(module: str, name: str, origin: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:
        raise PluginError(
            f"plugin {name!r} ({origin}, module {module}) failed to import: {_one_line(exc)}"
        ) from exc


def enable_tracing(pm: pluggy.PluginManager) -> None:
    """Print every hook call and its result to stderr (``SOULACY_TRACE_PLUGINS=1``)."""
    pm.trace.root.setwriter(sys.stderr.write)
    pm.enable_tracing()
