"""The builtin in-memory store: the ``trylast`` default of the three storage hooks.

History, runs, tool records, proofs, checkpoints and claims, in memory, gone with the process:
for tests, demos and runs with the SQLite store disabled (``-p no:sqlite_store``). Any other
store plugin answers before it. One store per kernel serves all three hooks, as one SQLite file
does. Block it too (``-p no:memory_store``) and a kernel without a store plugin fails with a
PluginError naming the hook instead of keeping nothing.

``MemoryStore`` is public: store kits and third-party tests build on it.
"""

from __future__ import annotations

from soulacy.kernel import Kernel, StashKey, hookimpl

from ._store import MemoryStore

__all__ = ["MemoryStore"]

_store_key = StashKey[MemoryStore]("memory_store")  # one store per kernel, gone with it


def store_of(kernel: Kernel) -> MemoryStore:
    """The kernel's memory store: one per kernel, serving every storage hook."""
    store = kernel.stash.get(_store_key, None)
    if store is None:
        store = kernel.stash[_store_key] = MemoryStore()
    return store


@hookimpl(trylast=True)
def soulacy_conversation_store(kernel: Kernel) -> MemoryStore:
    return store_of(kernel)


@hookimpl(trylast=True)
def soulacy_proof_store(kernel: Kernel) -> MemoryStore:
    return store_of(kernel)


@hookimpl(trylast=True)
def soulacy_checkpoint_store(kernel: Kernel) -> MemoryStore:
    return store_of(kernel)
