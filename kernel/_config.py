"""Configuration: plugin-declared sections of config.yaml and SOUL.yaml, loaded strictly.

Every key belongs to a section that some plugin declared through ``soulacy_config_sections``.
Values are structured into that plugin's attrs classes by the strict converter; where each value
came from (file, line, column, or an environment variable) is kept beside it, so that "absent"
and "explicitly set to the default" stay distinguishable and every error can point at its line.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from ._converter import ConfigValueError, converter
from ._durations import Duration
from ._errors import ConfigError, ConfigIssue, Location
from ._yamlio import load_yaml_file, position

Scope = Literal["workspace", "agent"]
ENV_PREFIX = "SOULACY_"

KeyPath = tuple[str | int, ...]
Keep = Callable[[KeyPath, str], None]
"""``keep(path, why)``: an adapter reports a value it took out (path relative to its own)."""
Adapter = Callable[[Any, KeyPath, Keep], Any]
"""``adapt(value, path, keep)`` returns the value to validate instead (or :data:`DROP`)."""
TrustCheck = Callable[[Any, str | None, Any, Any], Mapping[str, str]]
"""``allow(kernel, agent_id, value, saved)``, of a trust-root key that an editor outside the
trust root (HTTP) may change in part: the parts of ``value`` it refuses, each a dotted path
relative to the key (``""`` for the whole value, ``"2"`` for a list's third item) with the
reason; empty when the change is accepted. ``saved`` is what the file holds there now (None
when absent); ``agent_id`` is the agent edited (None in config.yaml)."""


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


DROP: Any = _Drop()
"""What an adapter returns to take the whole value out (after reporting it with ``keep``)."""


@attrs.frozen
class ConfigSection:
    """A key of config.yaml (``scope="workspace"``) or SOUL.yaml (``scope="agent"``) a plugin owns.

    ``key`` may be dotted in the workspace scope (``"llm.studio"``), so that plugins can share a
    top-level key such as ``llm`` without sharing a class. ``type`` is anything the strict
    converter can structure, usually an attrs class; ``default`` builds the value used when the
    key is absent (by default ``type()`` for attrs classes, else ``None``).

    A plugin may also *declare* keys of a file format it does not own (the original system's,
    say), with one of :meth:`known`, :meth:`alias` or :meth:`adapter`. Declarations never own a
    key and never conflict with an owner: they say what to do with a key that the owners'
    types do not take. :meth:`trust_root` declares a key (its own or another's) that only the
    operator changes, in the file: editors outside the trust root (``PATCH /config``, the
    agent editor) refuse it (``soulacy.plugins.yamledit.trust_root_changes``).
    """

    key: str
    type: Any
    scope: Scope = "workspace"
    default: Any = attrs.field(default=None, kw_only=True)
    doc: str = attrs.field(default="", kw_only=True)
    kept: bool = attrs.field(default=False, kw_only=True)
    alias_of: str | None = attrs.field(default=None, kw_only=True)
    adapt: Adapter | None = attrs.field(default=None, kw_only=True)
    trust: bool = attrs.field(default=False, kw_only=True)
    allow: TrustCheck | None = attrs.field(default=None, kw_only=True, eq=False)

    @classmethod
    def known(cls, key: str, scope: Scope = "workspace", *, doc: str = "") -> ConfigSection:
        """A known key no loaded plugin may implement: when no owner's type takes it, it stays
        in the file, has no effect, and is reported once as a warning (not as an error).

        ``key`` is dotted; a part may be a pattern (``"llm.providers.*.keep_alive"``, list
        items by index: ``"workflow.steps.*.if"``). A value that asks for nothing (empty,
        zero, false, null) is accepted without a warning.
        """
        return cls(key, object, scope, doc=doc, kept=True)

    @classmethod
    def alias(cls, key: str, of: str, scope: Scope = "workspace") -> ConfigSection:
        """An old name of the key ``of``: its value is used for ``of`` unless ``of`` is set too
        (then ``of`` wins, with a warning when they differ); errors and sources point at it."""
        return cls(key, object, scope, alias_of=of)

    @classmethod
    def adapter(cls, key: str, adapt: Adapter, scope: Scope = "workspace") -> ConfigSection:
        """Rewrite the value at ``key`` (a dotted pattern) before it is validated: an older shape
        into the owner's (the file itself is never rewritten)."""
        return cls(key, object, scope, adapt=adapt)

    @classmethod
    def trust_root(
        cls,
        key: str,
        scope: Scope = "workspace",
        *,
        doc: str = "",
        allow: TrustCheck | None = None,
    ) -> ConfigSection:
        """A key of the trust root: what names a file, a command, an environment variable, a
        listening address, an export endpoint or its headers, or turns on content capture.
        Written in the file by hand it works as any key; an editor outside the trust root
        (``PATCH /config``, the agent editor over HTTP) refuses any change of it, or of a
        section holding it, naming the field. ``key`` is dotted and may hold patterns
        (``"llm.providers.*.api_key_env"``); ``doc`` says what the key decides.

        ``allow`` (:data:`TrustCheck`) accepts a change in part instead: the agent's ``tools:``
        may name registered tools and files in the agent's folder, not any file.

        Keys named ``env`` or ``*_env`` are the trust root wherever they are, without a
        declaration: they name environment variables, or give a command its environment.
        """
        return cls(key, object, scope, doc=doc, trust=True, allow=allow)

    @staticmethod
    def trust_root_changes(
        sections: Iterable[OwnedSection],
        changes: Mapping[str, Any],
        scope: Scope = "workspace",
        *,
        aliases: Mapping[str, str] | None = None,
        saved: Mapping[str, Any] | None = None,
        kernel: Any = None,
        agent_id: str | None = None,
    ) -> dict[str, str]:
        """Deprecated: :func:`soulacy.plugins.yamledit.trust_root_changes`, where the check of
        every editor outside the trust root went with the other writing of configuration.
        This forwards to it for one release."""
        from soulacy.plugins.yamledit import trust_root_changes

        return trust_root_changes(
            sections, changes, scope, aliases=aliases, saved=saved, kernel=kernel, agent_id=agent_id
        )

    @property
    def owns(self) -> bool:
        """False for declarations (:meth:`known`, :meth:`alias`, :meth:`adapter`,
        :meth:`trust_root`)."""
        return not (self.kept or self.alias_of is not None or self.adapt is not None or self.trust)

    def make_default(self) -> Any:
        if callable(self.default):
            return self.default()
        if self.default is None and attrs.has(self.type):
            return self.type()
        return self.default


@attrs.frozen
class KeptKey:
    """A key that stays in the file with no effect: no loaded plugin implements it."""

    path: str
    location: Location
    doc: str = ""

    def __str__(self) -> str:
        why = f" ({self.doc})" if self.doc else ""
        return (
            f"{self.location}: {self.path}: not implemented by any loaded plugin;"
            f" kept in the file, it has no effect{why}"
        )


@attrs.frozen
class OwnedSection:
    section: ConfigSection
    plugin: str


@attrs.frozen
class SourceMap:
    """Where each dotted leaf path was set; a path absent from it took its default."""

    locations: Mapping[str, Location] = attrs.field(factory=dict)

    def is_set(self, path: str) -> bool:
        prefix = path + "."
        return path in self.locations or any(k.startswith(prefix) for k in self.locations)

    def source_of(self, path: str) -> Location | None:
        return self.locations.get(path)


@attrs.frozen
class Settings:
    """A loaded, validated file: typed sections plus where every value came from."""

    file: Path
    values: Mapping[str, Any]
    sources: SourceMap
    warnings: tuple[str, ...] = ()
    kept: tuple[KeptKey, ...] = ()  # in the file, implemented by no loaded plugin
    aliases: Mapping[str, str] = attrs.field(factory=dict)  # old dotted name -> new one
    # The section keys, longest first (a dotted section such as "store.sqlite" wins over
    # "store"): computed once, since every policy lookup of every run walks them.
    _longest_first: tuple[str, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        order = tuple(sorted(self.values, key=len, reverse=True))
        object.__setattr__(self, "_longest_first", order)

    def section(self, key: str) -> Any:
        """The typed value of a declared section (its default when the file leaves it out)."""
        try:
            return self.values[key]
        except KeyError:
            raise KeyError(f"no loaded plugin declares the section {key!r}") from None

    def is_set(self, path: str) -> bool:
        """True when ``path`` (or something below it) was written in the file or environment."""
        return self.sources.is_set(self.aliases.get(path, path))

    def source_of(self, path: str) -> Location | None:
        return self.sources.source_of(self.aliases.get(path, path))

    def get(self, path: str) -> Any:
        """The value at a dotted path, e.g. ``"runtime.timeouts.run"`` (or an old name of it)."""
        path = self.aliases.get(path, path)
        for key in self._longest_first:
            if path == key or path.startswith(key + "."):
                node = self.values[key]
                for part in path[len(key) + 1 :].split(".") if path != key else ():
                    node = node[part] if isinstance(node, Mapping) else getattr(node, part)
                return node
        raise KeyError(f"unknown configuration key {path!r}")

    def to_dict(self) -> dict[str, Any]:
        """Every section, defaults included, as plain data (nested by dotted key)."""
        out: dict[str, Any] = {}
        for key, value in sorted(self.values.items()):
            node = out
            *parents, last = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = converter.unstructure(value)
        return out


def parse_scalar(text: str, *, key: str | None = None, origin: str = "command line") -> Any:
    """Read a command-line or environment value the way YAML would (``300`` is an int).

    Text that is not a YAML value (``[1, 2``) is a ConfigError naming ``origin`` and ``key``.
    """
    try:
        return _yaml_value(text)
    except (YAMLError, RecursionError) as exc:
        raise ConfigError([_unreadable(text, exc, Location(origin), key)]) from None


def _yaml_value(text: str) -> Any:
    value = YAML(typ="safe", pure=True).load(text)
    return text if value is None and text.strip() not in ("null", "~") else value


def _unreadable(text: str, exc: BaseException, where: Location, key: str | None) -> ConfigIssue:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    mark = getattr(exc, "problem_mark", None)
    at = f" at column {mark.column + 1}" if mark is not None and "\n" not in text else ""
    message = (
        f"not a valid YAML value ({' '.join(str(problem).split())}{at}): {text!r};"
        " quote it to set a string"
    )
    return ConfigIssue(where, key or "", message)


def env_overrides(environ: Mapping[str, str]) -> dict[tuple[str, ...], tuple[str, Any]]:
    """``SOULACY_SECTION__KEY=value`` -> {("section", "key"): (variable name, parsed value)}.

    Raises one ConfigError naming every variable whose value is not YAML.
    """
    found, issues = _env_overrides(environ)
    if issues:
        raise ConfigError(issues)
    return found


def _env_overrides(
    environ: Mapping[str, str],
) -> tuple[dict[tuple[str, ...], tuple[str, Any]], list[ConfigIssue]]:
    found: dict[tuple[str, ...], tuple[str, Any]] = {}
    issues: list[ConfigIssue] = []
    for name, text in environ.items():
        if name.startswith(ENV_PREFIX) and "__" in name:
            path = tuple(p.lower() for p in name[len(ENV_PREFIX) :].split("__"))
            if not all(path):
                continue
            try:
                found[path] = (name, _yaml_value(text))
            except (YAMLError, RecursionError) as exc:
                where = Location(f"environment variable {name}")
                issues.append(_unreadable(text, exc, where, ".".join(path)))
    return found, issues


def _did_you_mean(key: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, sorted(choices), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _lookup(tree: Any, path: KeyPath) -> tuple[bool, Any]:
    node = tree
    for part in path:
        in_map = isinstance(node, Mapping) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_map or in_list:
            node = node[part]
        else:
            return False, None
    return True, node


def _pattern(key: str) -> tuple[str, ...]:
    return tuple(key.split("."))


def _matches(path: KeyPath, pattern: tuple[str, ...]) -> bool:
    return len(path) == len(pattern) and all(
        fnmatch.fnmatchcase(str(part), want) for part, want in zip(path, pattern, strict=True)
    )


def _expand(data: Any, pattern: tuple[str, ...], prefix: KeyPath = ()) -> list[KeyPath]:
    """Every path in ``data`` that ``pattern`` matches (``*`` parts over keys and indexes)."""
    if not pattern:
        return [prefix]
    head, rest = pattern[0], pattern[1:]
    if isinstance(data, dict):
        children: list[tuple[str | int, Any]] = list(data.items())
    elif isinstance(data, list):
        children = list(enumerate(data))
    else:
        return []
    out: list[KeyPath] = []
    for key, value in children:
        if fnmatch.fnmatchcase(str(key), head):
            out.extend(_expand(value, rest, (*prefix, key)))
    return out


def _asks_for_nothing(value: Any) -> bool:
    """An empty, zero, false or null value: the original wrote such zero values for "unset"."""
    if value is None or value is False or value == "" or value == [] or value == {}:
        return True
    return isinstance(value, int | float) and not isinstance(value, bool) and value == 0


def _fits(type_: Any, value: Any) -> bool:
    """Whether ``value`` has the shape ``type_`` takes (mapping, list or scalar), shallowly."""
    if type_ is Any or type_ is object:
        return True
    args = typing.get_args(type_)
    if typing.get_origin(type_) in (typing.Union, types.UnionType):
        return any(_fits(arg, value) for arg in args)
    if type_ is type(None):
        return value is None
    if attrs.has(type_) and type_ is not Duration:
        return isinstance(value, Mapping) or value is None
    origin = typing.get_origin(type_) or type_
    if origin in (dict, Mapping) or origin is dict:
        return isinstance(value, Mapping)
    if origin in (list, tuple, Sequence, set, frozenset):
        return isinstance(value, list)
    return not isinstance(value, Mapping | list)  # a scalar: the converter checks which


def _unwrap(type_: Any) -> Any:
    """``X | None`` -> ``X``: what a present value is structured as."""
    if typing.get_origin(type_) in (typing.Union, types.UnionType):
        present = [arg for arg in typing.get_args(type_) if arg is not type(None)]
        if len(present) == 1:
            return present[0]
    return type_


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # a class whose annotations cannot be resolved: no stripping below it
        return {}
    return {field.name: hints.get(field.name, Any) for field in attrs.fields(cls)}


class _Loader:
    """Turns one parsed document (plus environment overrides) into Settings or one ConfigError."""

    def __init__(
        self,
        file: Path,
        doc: Mapping[str, Any],
        sections: Iterable[OwnedSection],
        environ: Mapping[str, str] | None = None,
        check_keys: bool = True,
    ) -> None:
        self.check_keys = check_keys
        self.file = file
        self.doc = doc
        chosen = list(sections)
        self.sections = {o.section.key: o.section for o in chosen if o.section.owns}
        self.known = [(_pattern(o.section.key), o.section.doc) for o in chosen if o.section.kept]
        self.aliases = [o.section for o in chosen if o.section.alias_of is not None]
        self.adapters = [o.section for o in chosen if o.section.adapt is not None]
        self.issues: list[ConfigIssue] = []
        self.warnings: list[tuple[Location, str]] = []
        self.kept: list[KeptKey] = []
        self.env_locations: dict[str, Location] = {}
        self.moved: dict[KeyPath, KeyPath] = {}  # new path -> the old name's path in the file
        overrides: dict[tuple[str, ...], tuple[str, Any]] = {}
        if environ is not None:
            overrides, self.issues = _env_overrides(environ)
        self.data = self._merge(doc, overrides)

    def _merge(
        self, doc: Mapping[str, Any], overrides: Mapping[tuple[str, ...], tuple[str, Any]]
    ) -> dict[str, Any]:
        data: dict[str, Any] = _plain(doc)
        for path, (var, value) in sorted(overrides.items()):
            node = data
            for part in path[:-1]:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
            node[path[-1]] = value
            self.env_locations[".".join(path)] = Location(f"environment variable {var}")
        return data

    def _in_file(self, path: KeyPath) -> KeyPath:
        """Where a (possibly moved) value is written: a path under an alias's new name is under
        its old name in the file."""
        for new, old in self.moved.items():
            if path[: len(new)] == new:
                return (*old, *path[len(new) :])
        return path

    def location(self, path: KeyPath) -> Location:
        path = self._in_file(path)
        dotted = ".".join(str(p) for p in path)
        for key, loc in self.env_locations.items():
            # the variable set this value, or something below it (an unknown key, say)
            if dotted == key or dotted.startswith(key + ".") or key.startswith(dotted + "."):
                return loc
        pos = position(self.doc, path)
        return Location(str(self.file), *pos) if pos else Location(str(self.file))

    def issue(self, path: KeyPath, message: str) -> None:
        found, value = _lookup(self.data, path)
        dotted = ".".join(str(p) for p in path)
        self.issues.append(ConfigIssue(self.location(path), dotted, message, value, found))

    def warn(self, path: KeyPath, message: str) -> None:
        dotted = ".".join(str(p) for p in self._in_file(path))
        location = self.location(path)
        self.warnings.append((location, f"{location}: {dotted}: {message}"))

    # -- declarations: old names, older shapes, kept keys -----------------------------------

    def _known(self, path: KeyPath) -> tuple[bool, str]:
        for pattern, doc in self.known:
            if _matches(path, pattern):
                return True, doc
        return False, ""

    def _known_names(self, parent: KeyPath) -> list[str]:
        """Known keys right below ``parent`` (for a did-you-mean)."""
        return [
            pattern[-1]
            for pattern, _ in self.known
            if len(pattern) == len(parent) + 1 and _matches(parent, pattern[:-1])
        ]

    def _keep(self, parent: dict[str, Any], key: str, path: KeyPath, doc: str) -> None:
        """Take a kept key out of what is validated (it stays in the file) and report it."""
        value = parent.pop(key)
        if not _asks_for_nothing(value):
            self.keep(path, doc)

    def keep(self, path: KeyPath, doc: str) -> None:
        kept = KeptKey(".".join(str(p) for p in self._in_file(path)), self.location(path), doc)
        self.kept.append(kept)
        self.warnings.append((kept.location, str(kept)))

    def _apply_aliases(self) -> None:
        for alias in self.aliases:
            assert alias.alias_of is not None
            old, new = _pattern(alias.key), _pattern(alias.alias_of)
            found, value = _lookup(self.data, old)
            parent_found, parent = _lookup(self.data, old[:-1])
            if not found or not parent_found or not isinstance(parent, dict):
                continue
            is_set, current = _lookup(self.data, new)
            if is_set:
                del parent[old[-1]]
                if not self._same(new, current, value):
                    self.warn(
                        old,
                        f"the original system's name of {alias.alias_of}, which is also set;"
                        f" {alias.alias_of} applies (the value here has no effect)",
                    )
                continue
            node = self.data
            for part in new[:-1]:
                child = node.get(part)
                if child is None:
                    child = node[part] = {}
                if not isinstance(child, dict):
                    break  # not a mapping: left where it is, for the key check to report
                node = child
            else:
                del parent[old[-1]]
                node[new[-1]] = value
                self.moved[new] = old

    def _type_at(self, path: KeyPath) -> Any:
        """The declared type of the value at ``path`` (None when no section declares it)."""
        for key, section in self.sections.items():
            head = _pattern(key)
            if path[: len(head)] != head:
                continue
            type_: Any = section.type
            for part in path[len(head) :]:
                type_ = _unwrap(type_)
                args = typing.get_args(type_)
                if attrs.has(type_) and isinstance(part, str):
                    type_ = _field_types(type_).get(part)
                elif typing.get_origin(type_) in (dict, Mapping) and len(args) == 2:
                    type_ = args[1]
                else:
                    return None
                if type_ is None:
                    return None
            return type_
        return None

    def _same(self, path: KeyPath, one: Any, other: Any) -> bool:
        """Equal as the key's type reads them (``120s`` is ``2m``), else as written."""
        if one == other:
            return True
        type_ = self._type_at(path)
        if type_ is None:
            return False
        try:
            return bool(converter.structure(one, type_) == converter.structure(other, type_))
        except Exception:  # either one is invalid: the key check and structuring say so
            return False

    def _apply_adapters(self) -> None:
        for adapter in self.adapters:
            assert adapter.adapt is not None
            for path in _expand(self.data, _pattern(adapter.key)):
                _, parent = _lookup(self.data, path[:-1])
                value = parent[path[-1]]

                def keep(sub: KeyPath, doc: str, base: KeyPath = path) -> None:
                    self.keep((*base, *sub), doc)

                new = adapter.adapt(value, path, keep)
                if new is DROP:
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = new

    # -- validation -------------------------------------------------------------------------

    def load(self) -> Settings:
        self._apply_aliases()
        self._apply_adapters()
        if self.check_keys:
            self._check_keys(self.data, (), self._key_tree())
        values: dict[str, Any] = {}
        for key, section in self.sections.items():
            path = tuple(key.split("."))
            found, raw = _lookup(self.data, path)
            if not found or (raw is None and attrs.has(section.type)):
                values[key] = section.make_default()
                continue
            if self.known:
                self._strip(raw, section.type, path)
            try:
                values[key] = converter.structure(raw, section.type)
            except Exception as exc:  # cattrs reports every problem of the section at once
                self._collect(exc, path)
        if self.issues:
            raise ConfigError(sorted(self.issues, key=_by_position))
        aliases = {a.key: a.alias_of for a in self.aliases if a.alias_of is not None}
        in_order = sorted(self.warnings, key=lambda w: _position_key(w[0]))
        return Settings(
            self.file,
            values,
            SourceMap(self._sources()),
            tuple(text for _, text in in_order),
            tuple(sorted(self.kept, key=lambda k: _position_key(k.location))),
            aliases,
        )

    def _key_tree(self) -> dict[str, Any]:
        tree: dict[str, Any] = {}
        for key in self.sections:
            node = tree
            *parents, last = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[last] = None  # a leaf: the section's own class checks what is below it
        return tree

    def _check_keys(self, data: Any, path: tuple[str, ...], tree: dict[str, Any]) -> None:
        if not isinstance(data, dict):  # _merge made every mapping a plain dict
            self.issue(path, "expected a mapping of keys")
            return
        for key in list(data):
            if not isinstance(key, str):
                self.issue((*path, key), "keys must be strings")
                continue
            if key in tree:
                if tree[key] is not None:
                    self._check_keys(data[key], (*path, key), tree[key])
                continue
            known, doc = self._known((*path, key))
            if known:
                self._keep(data, key, (*path, key), doc)
                continue
            choices = [*tree, *self._known_names(path)]
            self.issue((*path, key), "unknown key" + _did_you_mean(key, choices))

    def _strip(self, value: Any, type_: Any, path: KeyPath) -> None:
        """Take known keys that ``type_`` does not take out of ``value`` (a section's data), at
        any depth, so that the strict converter sees only what the owner declared."""
        type_ = _unwrap(type_)
        if attrs.has(type_) and isinstance(value, dict):
            fields = _field_types(type_)
            if not fields:
                return
            for key in list(value):
                sub = (*path, key)
                if key not in fields:
                    known, doc = self._known(sub)
                    if known:
                        self._keep(value, key, sub, doc)
                elif not _fits(fields[key], value[key]):
                    known, doc = self._known(sub)
                    if known:  # an older shape under the same name (a mapping for a string)
                        self._keep(value, key, sub, doc)
                else:
                    self._strip(value[key], fields[key], sub)
            return
        origin, args = typing.get_origin(type_), typing.get_args(type_)
        if origin in (dict, Mapping) and isinstance(value, dict) and len(args) == 2:
            for key, item in value.items():
                self._strip(item, args[1], (*path, key))
        elif origin in (list, Sequence) and isinstance(value, list) and len(args) == 1:
            for index, item in enumerate(value):
                self._strip(item, args[0], (*path, index))

    def _collect(self, exc: BaseException, path: KeyPath) -> None:
        if isinstance(exc, ClassValidationError | IterableValidationError):
            with_notes, without = exc.group_exceptions()
            for sub, note in with_notes:
                step: str | int = (
                    note.name if isinstance(note, AttributeValidationNote) else (note.index)
                )
                self._collect(sub, (*path, step))
            for sub in without:
                self._collect(sub, path)
        elif isinstance(exc, ForbiddenExtraKeysError):
            fields = [a.name for a in attrs.fields(exc.cl)] + self._known_names(path)
            for key in sorted(exc.extra_fields):
                self.issue((*path, key), "unknown key" + _did_you_mean(key, fields))
        elif isinstance(exc, ConfigValueError):
            self.issue(path, str(exc))
        elif isinstance(exc, KeyError):
            self.issue(path, "required key is missing")
        else:
            self.issue(path, f"invalid value ({exc})")

    def _sources(self) -> dict[str, Location]:
        out: dict[str, Location] = {}

        def walk(node: Any, path: tuple[str, ...]) -> None:
            if isinstance(node, Mapping) and node:
                for key, value in node.items():
                    walk(value, (*path, str(key)))
            elif path:
                out[".".join(path)] = self.location(path)

        walk(self.data, ())
        return out


def _by_position(issue: ConfigIssue) -> tuple[int, int]:
    return _position_key(issue.location)


def _position_key(location: Location) -> tuple[int, int]:
    return (location.line or 0, location.column or 0)


def _plain(node: Any) -> Any:
    """Plain dicts, lists and scalars: ruamel's scalar subclasses (kept for round trips) would
    otherwise leak into values typed ``Any`` (a tool's arguments, say)."""
    if isinstance(node, Mapping):
        return {k: _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if type(node) in (bool, str, int, float):
        return node
    for plain in (bool, str, int, float):  # bool before int: bool is an int subclass
        if isinstance(node, plain):
            return plain(node)
    return node


def load_settings(
    file: Path,
    doc: Mapping[str, Any],
    sections: Iterable[OwnedSection],
    *,
    scope: Scope,
    environ: Mapping[str, str] | None = None,
    check_keys: bool = True,
) -> Settings:
    """Validate ``doc`` (parsed from ``file``) against the sections declared for ``scope``.

    ``check_keys=False`` validates the declared sections only and ignores other keys.
    Declarations (:meth:`ConfigSection.known`, ``alias``, ``adapter``) apply as well: a key
    of a known format that no owner takes is kept and warned about, not an error.
    """
    chosen = [owned for owned in sections if owned.section.scope == scope]
    return _Loader(file, doc, chosen, environ, check_keys).load()


def check_section_owners(sections: Iterable[OwnedSection]) -> list[str]:
    """Conflicts between plugins: the same key, or one key nested inside another's.

    Declarations own nothing, so they conflict with no one.
    """
    problems: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    for owned in sections:
        if not owned.section.owns:
            continue
        scope, key = owned.section.scope, owned.section.key
        for (other_scope, other_key), other_plugin in seen.items():
            if other_scope != scope:
                continue
            if (
                key == other_key
                or key.startswith(other_key + ".")
                or other_key.startswith(key + ".")
            ):
                problems.append(
                    f"plugins {other_plugin!r} and {owned.plugin!r} both claim the {scope}"
                    f" config section {key if key == other_key else f'{other_key} / {key}'!r}"
                )
        seen[(scope, key)] = owned.plugin
    return problems


def structure(data: Any, type_: Any, *, origin: str, key: str) -> Any:
    """Structure plain ``data`` (a request body, say) strictly into ``type_``.

    Problems raise one ConfigError whose issues name ``origin`` and the dotted path below
    ``key``, e.g. ``request: overrides.max_turns: expected an integer``.
    """
    owned = [OwnedSection(ConfigSection(key, type_), "kernel")]
    doc = {key: data} if data is not None else {}
    return _Loader(Path(origin), doc, owned).load().section(key)


def load_document(file: Path, type_: Any) -> Any:
    """Load a whole YAML file strictly as the attrs class ``type_`` (errors point at lines)."""
    attrs.resolve_types(type_)
    owned = [
        OwnedSection(ConfigSection(field.name, field.type, default=_field_default(field)), "kernel")
        for field in attrs.fields(type_)
    ]
    settings = _Loader(file, load_yaml_file(file), owned).load()
    return type_(**{field.name: settings.section(field.name) for field in attrs.fields(type_)})


def _field_default(field: Any) -> Any:
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory
    return None if default is attrs.NOTHING else (lambda: default)
