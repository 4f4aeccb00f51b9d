"""Configuration: plugin-declared sections of config.yaml and SOUL.yaml, loaded strictly.

Every key belongs to a section that some plugin declared through ``soulacy_config_sections``.
Values are structured into that plugin's attrs classes by the strict converter; where each value
came from (file, line, column, or an environment variable) is kept beside it, so that "absent"
and "explicitly set to the default" stay distinguishable and every error can point at its line.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
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

from ._converter import ConfigValueError, converter
from ._errors import ConfigError, ConfigIssue, Location
from ._yamlio import load_yaml_file, position

Scope = Literal["workspace", "agent"]
ENV_PREFIX = "SOULACY_"

# Keys that the original system's files carry. When no loaded plugin handles one of them, it is a
# warning rather than an error, so that existing files keep loading with a plugin disabled.
ORIGINAL_WORKSPACE_KEYS = frozenset(
    {
        "runtime",
        "costs",
        "llm",
        "server",
        "plugins",
        "rate_limit",
        "memory",
        "search",
        "updates",
        "support",
        "logging",
        "retention",
        "studio",
        "channels",
        "workspace",
    }
)
ORIGINAL_AGENT_KEYS = frozenset(
    {
        "id",
        "name",
        "description",
        "llm",
        "system_prompt",
        "tools",
        "max_turns",
        "budget",
        "run_timeout",
        "reasoning",
        "schedule",
        "outcome",
        "workflow",
        "confirm_tools",
        "stream_reply",
        "enabled",
        "no_progress_limit",
        "memory",
        "skills",
        "channels",
    }
)


@attrs.frozen
class ConfigSection:
    """A key of config.yaml (``scope="workspace"``) or SOUL.yaml (``scope="agent"``) a plugin owns.

    ``key`` may be dotted in the workspace scope (``"llm.studio"``), so that plugins can share a
    top-level key such as ``llm`` without sharing a class. ``type`` is anything the strict
    converter can structure, usually an attrs class; ``default`` builds the value used when the
    key is absent (by default ``type()`` for attrs classes, else ``None``).
    """

    key: str
    type: Any
    scope: Scope = "workspace"
    default: Any = attrs.field(default=None, kw_only=True)
    doc: str = attrs.field(default="", kw_only=True)

    def make_default(self) -> Any:
        if callable(self.default):
            return self.default()
        if self.default is None and attrs.has(self.type):
            return self.type()
        return self.default


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

    def section(self, key: str) -> Any:
        """The typed value of a declared section (its default when the file leaves it out)."""
        try:
            return self.values[key]
        except KeyError:
            raise KeyError(f"no loaded plugin declares the section {key!r}") from None

    def is_set(self, path: str) -> bool:
        """True when ``path`` (or something below it) was written in the file or environment."""
        return self.sources.is_set(path)

    def source_of(self, path: str) -> Location | None:
        return self.sources.source_of(path)

    def get(self, path: str) -> Any:
        """The value at a dotted path, e.g. ``"runtime.timeouts.run"``."""
        for key in sorted(self.values, key=len, reverse=True):
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


def parse_scalar(text: str) -> Any:
    """Read a command-line or environment value the way YAML would (``300`` is an int)."""
    value = YAML(typ="safe", pure=True).load(text)
    return text if value is None and text.strip() not in ("null", "~") else value


def env_overrides(environ: Mapping[str, str]) -> dict[tuple[str, ...], tuple[str, Any]]:
    """``SOULACY_SECTION__KEY=value`` -> {("section", "key"): (variable name, parsed value)}."""
    found: dict[tuple[str, ...], tuple[str, Any]] = {}
    for name, text in environ.items():
        if name.startswith(ENV_PREFIX) and "__" in name:
            path = tuple(p.lower() for p in name[len(ENV_PREFIX) :].split("__"))
            if all(path):
                found[path] = (name, parse_scalar(text))
    return found


def _did_you_mean(key: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, sorted(choices), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _lookup(tree: Any, path: tuple[str | int, ...]) -> tuple[bool, Any]:
    node = tree
    for part in path:
        in_map = isinstance(node, Mapping) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_map or in_list:
            node = node[part]
        else:
            return False, None
    return True, node


class _Loader:
    """Turns one parsed document (plus environment overrides) into Settings or one ConfigError."""

    def __init__(
        self,
        file: Path,
        doc: Mapping[str, Any],
        sections: Iterable[OwnedSection],
        original_keys: frozenset[str],
        overrides: Mapping[tuple[str, ...], tuple[str, Any]] | None = None,
        check_keys: bool = True,
    ) -> None:
        self.check_keys = check_keys
        self.file = file
        self.doc = doc
        self.sections = {owned.section.key: owned.section for owned in sections}
        self.original_keys = original_keys
        self.issues: list[ConfigIssue] = []
        self.warnings: list[str] = []
        self.env_locations: dict[str, Location] = {}
        self.data = self._merge(doc, overrides or {})

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

    def location(self, path: tuple[str | int, ...]) -> Location:
        dotted = ".".join(str(p) for p in path)
        for key, loc in self.env_locations.items():
            # the variable set this value, or something below it (an unknown key, say)
            if dotted == key or dotted.startswith(key + ".") or key.startswith(dotted + "."):
                return loc
        pos = position(self.doc, path)
        return Location(str(self.file), *pos) if pos else Location(str(self.file))

    def issue(self, path: tuple[str | int, ...], message: str) -> None:
        found, value = _lookup(self.data, path)
        dotted = ".".join(str(p) for p in path)
        self.issues.append(ConfigIssue(self.location(path), dotted, message, value, found))

    def load(self) -> Settings:
        if self.check_keys:
            self._check_keys(self.data, (), self._key_tree())
        values: dict[str, Any] = {}
        for key, section in self.sections.items():
            path = tuple(key.split("."))
            found, raw = _lookup(self.data, path)
            if not found or (raw is None and attrs.has(section.type)):
                values[key] = section.make_default()
                continue
            try:
                values[key] = converter.structure(raw, section.type)
            except Exception as exc:  # cattrs reports every problem of the section at once
                self._collect(exc, path)
        if self.issues:
            raise ConfigError(sorted(self.issues, key=_by_position))
        return Settings(self.file, values, SourceMap(self._sources()), tuple(self.warnings))

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
            if not path and key in self.original_keys:
                self.warnings.append(
                    f"{self.location((key,))}: {key!r} is not handled by any loaded plugin;"
                    " it is kept in the file but has no effect"
                )
                del data[key]
                continue
            self.issue((*path, key), "unknown key" + _did_you_mean(key, tree))

    def _collect(self, exc: BaseException, path: tuple[str | int, ...]) -> None:
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
            fields = [a.name for a in attrs.fields(exc.cl)]
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
    return (issue.location.line or 0, issue.location.column or 0)


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
    """
    chosen = [owned for owned in sections if owned.section.scope == scope]
    original = ORIGINAL_WORKSPACE_KEYS if scope == "workspace" else ORIGINAL_AGENT_KEYS
    overrides = env_overrides(environ) if environ is not None else None
    return _Loader(file, doc, chosen, original, overrides, check_keys).load()


def check_section_owners(sections: Iterable[OwnedSection]) -> list[str]:
    """Conflicts between plugins: the same key, or one key nested inside another's."""
    problems: list[str] = []
    seen: dict[tuple[str, str], str] = {}
    for owned in sections:
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
    return _Loader(Path(origin), doc, owned, frozenset()).load().section(key)


def load_document(file: Path, type_: Any) -> Any:
    """Load a whole YAML file strictly as the attrs class ``type_`` (errors point at lines)."""
    attrs.resolve_types(type_)
    owned = [
        OwnedSection(ConfigSection(field.name, field.type, default=_field_default(field)), "kernel")
        for field in attrs.fields(type_)
    ]
    settings = _Loader(file, load_yaml_file(file), owned, frozenset()).load()
    return type_(**{field.name: settings.section(field.name) for field in attrs.fields(type_)})


def _field_default(field: Any) -> Any:
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        return default.factory
    return None if default is attrs.NOTHING else (lambda: default)
