"""The builtin in-memory store: the ``trylast`` default of ``soulacy_store``.

History, runs, tool records, proofs, checkpoints, plugin state, leases, cancellation requests
and counters, in memory, gone with the process: for tests, demos and runs with the SQLite store
disabled (``-p no:sqlite_store``). Any other store plugin answers before it. It serves one
process only (``MemoryStore.multi_process`` is False): its leases exclude the runs of one
kernel from each other, never another process. Block it too (``-p no:memory_store``) and a
kernel without a store plugin fails with a PluginError naming the hook instead of keeping
nothing.

``MemoryStore`` is public: store kits and third-party tests build on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulacy.kernel import StashKey, hookimpl, lazy_exports

if TYPE_CHECKING:  # the store imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import Kernel

    from ._store import MemoryStore

__all__ = ["MemoryStore"]

_store_key = StashKey["MemoryStore"]("memory_store")  # one store per kernel, gone with it


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, {"MemoryStore": "._store"})


def store_of(kernel: Kernel) -> MemoryStore:
    """The kernel's memory store: one per kernel, playing every store role."""
    store = kernel.stash.get(_store_key, None)
    if store is None:
        from ._store import MemoryStore

        store = kernel.stash[_store_key] = MemoryStore()
    return store


@hookimpl(trylast=True)
def soulacy_store(kernel: Kernel) -> MemoryStore:
    return store_of(kernel)
