"""Per-kernel plugin state: a typed stash on the kernel, as pytest's ``config.stash``.

A plugin keeps what belongs to one kernel (its store, its run logs) in ``kernel.stash`` under a
:class:`StashKey` it creates once at import, instead of in a module-level dictionary keyed by
kernel: two kernels in one process then share nothing, and the state goes with its kernel::

    _store_key = StashKey[SQLiteStore]()

    def store_of(kernel: Kernel) -> SQLiteStore:
        store = kernel.stash.get(_store_key, None)
        if store is None:
            store = kernel.stash[_store_key] = SQLiteStore(...)
        return store

A key is an object, not a string: no two plugins can collide on a name, and the value's type is
the key's type parameter, which a type checker follows through ``stash[key]``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

__all__ = ["Stash", "StashKey"]

T = TypeVar("T")
D = TypeVar("D")


class StashKey(Generic[T]):
    """A key of a :class:`Stash`; its type parameter is the type of the value it holds.

    Make one per kind of state, at import (``StashKey[RunLogs]()``); keys compare by
    identity. ``name`` only shows in a repr.
    """

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<StashKey {self.name}>" if self.name else f"<StashKey at {id(self):#x}>"


class Stash:
    """A mapping of :class:`StashKey` to values of the key's type; one per kernel."""

    __slots__ = ("_storage",)

    def __init__(self) -> None:
        self._storage: dict[StashKey[Any], object] = {}

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._storage[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        """The value of ``key``; KeyError when it has none."""
        return cast("T", self._storage[key])

    def get(self, key: StashKey[T], default: D) -> T | D:
        """The value of ``key``, or ``default`` when it has none."""
        # No KeyError raised and caught: plugins ask on every turn, often for what is unset.
        return cast("T | D", self._storage.get(key, default))

    def setdefault(self, key: StashKey[T], default: T) -> T:
        """The value of ``key``, set to ``default`` first when it has none."""
        return cast("T", self._storage.setdefault(key, default))

    def pop(self, key: StashKey[T], default: D) -> T | D:
        """Remove the value of ``key`` and return it, or ``default`` when it has none."""
        return cast("T | D", self._storage.pop(key, default))

    def __delitem__(self, key: StashKey[T]) -> None:
        del self._storage[key]

    def __contains__(self, key: StashKey[T]) -> bool:
        return key in self._storage

    def __len__(self) -> int:
        return len(self._storage)
