"""The resolved policies of one kernel, kept until what they were resolved from changes
(decision 0041).

A policy is a pure function of the workspace settings, the agent's SOUL.yaml, the request's
overrides, the model's capacity and the limits the loaded plugins declare. The kernel replaces
its ``Settings`` when the configuration changes (``update_config``, behind ``PATCH /config``
and ``soulacy config set``) and its ``AgentSpec`` when an agent is reloaded
(``forget_agent``): both are immutable, so an entry is valid while they are the very objects
it was resolved from, and the capacity and declared limits compare equal. Nothing has to
invalidate it; a stale entry is never served.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import StashKey

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, Kernel, Settings
    from soulacy.kernel.policy import ExecutionPolicy, ModelCapacity, PolicyLimit

# Requests choose their overrides: the number of distinct ones kept is bounded.
MAX_ENTRIES = 256


@attrs.frozen
class _Entry:
    agent: AgentSpec
    capacity: ModelCapacity | None
    declared: tuple[PolicyLimit, ...]
    policy: ExecutionPolicy


class PolicyCache:
    """Resolved policies by (agent id, overrides), for one workspace configuration."""

    def __init__(self) -> None:
        self._config: Settings | None = None
        self._entries: dict[tuple[str, Hashable], _Entry] = {}
        self._declaring: list[Any] | None = None
        self._declared: tuple[PolicyLimit, ...] = ()

    def declared(self, kernel: Kernel) -> tuple[PolicyLimit, ...]:
        """The limits the loaded plugins declare, collected again only when the plugins that
        implement ``soulacy_policy_limits`` change (a declaration takes no argument)."""
        implementations = kernel.hook.soulacy_policy_limits.get_hookimpls()
        if implementations != self._declaring:  # HookImpl compares by identity
            from soulacy.kernel.policy import declared_limits

            self._declared = tuple(declared_limits(kernel).values())
            self._declaring = implementations
        return self._declared

    def get(
        self,
        key: tuple[str, Hashable],
        config: Settings,
        agent: AgentSpec,
        capacity: ModelCapacity | None,
        declared: tuple[PolicyLimit, ...],
    ) -> ExecutionPolicy | None:
        if config is not self._config:
            return None
        entry = self._entries.get(key)
        if entry is None or entry.agent is not agent:
            return None
        if entry.capacity != capacity or entry.declared != declared:
            return None
        return entry.policy

    def put(
        self,
        key: tuple[str, Hashable],
        config: Settings,
        agent: AgentSpec,
        capacity: ModelCapacity | None,
        declared: tuple[PolicyLimit, ...],
        policy: ExecutionPolicy,
    ) -> None:
        if config is not self._config:  # a new configuration: every entry is stale
            self._entries.clear()
            self._config = config
        elif key not in self._entries and len(self._entries) >= MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]  # the oldest
        self._entries[key] = _Entry(agent, capacity, declared, policy)

    def __len__(self) -> int:
        return len(self._entries)


POLICY_CACHE = StashKey[PolicyCache]("policy cache")


class _Unhashable(Exception):
    pass


def overrides_key(raw: Any) -> Hashable | None:
    """A hashable key equal only for overrides that resolve alike, or None (not cached).

    Types are part of the key: ``True == 1`` in Python, but a request's ``true`` is not a
    turn count, and must still be refused as it would be without the cache.
    """
    if not raw:
        return ()
    try:
        return _frozen(raw)
    except _Unhashable:
        return None


def _frozen(value: Any) -> Hashable:
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((repr(k), _frozen(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("seq", tuple(_frozen(v) for v in value))
    if value is None or isinstance(value, str | int | float | bool):
        return (type(value), value)
    if attrs.has(type(value)):  # a RequestOverrides given by Python code: its fields, typed
        fields = attrs.asdict(value, recurse=False)
        return (type(value), _frozen(fields))
    raise _Unhashable
