"""What an editor outside the trust root may not change (:func:`trust_root_changes`): the
keys that name code, secrets or where data goes.

Which keys are the trust root is declared with the configuration (``ConfigSection.trust_root``,
by the plugins that own them); this check, which every editor outside the trust root makes
before it writes (``PATCH /config``, the agent editor), is the editors' (decision 0058).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from soulacy.kernel import ConfigSection, Scope


class OwnedSection(Protocol):
    """A section as the kernel keeps it (``kernel.sections``): declared by a plugin."""

    @property
    def section(self) -> ConfigSection: ...


# The kernel's own keys of the trust root: which plugins load is which code runs; the store
# is where every principal's data lives (its sections are the store plugins', which may declare
# them themselves; declared twice is the same).
KERNEL_TRUST_ROOT = (
    ConfigSection.trust_root("plugins", doc="which plugins load: which code runs"),
    ConfigSection.trust_root("store", doc="where data lives: the SQLite file"),
    ConfigSection.trust_root("postgres", doc="where data lives: the PostgreSQL DSN"),
)
NAMES_A_VARIABLE = "names an environment variable, or gives a command its environment"


def names_a_variable(key: str) -> bool:
    """``env`` and ``*_env`` keys: the trust root wherever they are, declared or not."""
    key = key.lower()
    return key == "env" or key.endswith("_env")


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
    """The dotted fields of ``changes`` that set, replace or delete part of the trust root,
    each with the reason (``ConfigSection.trust_root_changes``, which documents the rest).

    A field is refused when it is, or lies below, a key declared with
    :meth:`ConfigSection.trust_root` (whose ``allow``, if any, decides on the value instead);
    when its name is ``env`` or ends in ``_env``; or when a value other than a mapping replaces
    a section that holds such a key (declared below it, or ``*_env`` in the saved file or the
    value itself). A mapping merges member by member, so only its members are looked at.
    """
    declared = [
        (tuple(section.key.split(".")), section)
        for section in (*KERNEL_TRUST_ROOT, *(owned.section for owned in sections))
        if section.trust and section.scope == scope
    ]
    file = "config.yaml and restart" if scope == "workspace" else "the agent's SOUL.yaml"
    found: dict[str, str] = {}

    def refuse(path: tuple[str, ...], what: str) -> None:
        because = f" ({what})" if what else ""
        found[".".join(path)] = (
            f"part of the trust root{because}: not changeable over HTTP; edit {file}"
        )

    def visit(path: tuple[str, ...], value: Any) -> None:
        canonical = _canonical(path, aliases or {})
        for pattern, section in declared:
            size = len(pattern)
            if len(canonical) < size or not _matches(canonical[:size], pattern):
                continue
            if section.allow is None or kernel is None or len(canonical) > size:
                refuse(path, section.doc)  # (a check in part needs the kernel to look)
                return
            at = _saved_at(saved, canonical)
            for part, reason in section.allow(kernel, agent_id, value, at).items():
                found[".".join((*path, part) if part else path)] = reason
            return
        if names_a_variable(path[-1]):
            refuse(path, NAMES_A_VARIABLE)
        elif isinstance(value, Mapping):
            for key, member in value.items():
                visit((*path, *str(key).split(".")), member)
        else:  # replaces whatever the file has there: a section holding trust-root keys?
            holding = next(
                (
                    section
                    for pattern, section in declared
                    if len(pattern) > len(canonical)
                    and _matches(canonical, pattern[: len(canonical)])
                ),
                None,
            )
            if holding is not None:
                refuse(path, holding.doc)
            elif _holds_variables(value) or _holds_variables(_saved_at(saved, canonical)):
                refuse(path, NAMES_A_VARIABLE)

    for key, value in changes.items():
        visit(tuple(str(key).split(".")), value)
    return found


def _canonical(path: tuple[str, ...], aliases: Mapping[str, str]) -> tuple[str, ...]:
    """``path`` under the new name of an old one (``Settings.aliases``)."""
    for old, new in aliases.items():
        parts = tuple(old.split("."))
        if path[: len(parts)] == parts:
            return (*new.split("."), *path[len(parts) :])
    return path


def _saved_at(saved: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    node: Any = saved
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _holds_variables(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(names_a_variable(str(k)) or _holds_variables(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_variables(v) for v in value)
    return False


def _matches(path: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """``path`` matches ``pattern`` part for part (a part of a pattern may be ``*``)."""
    return len(path) == len(pattern) and all(
        fnmatch.fnmatchcase(part, want) for part, want in zip(path, pattern, strict=True)
    )
