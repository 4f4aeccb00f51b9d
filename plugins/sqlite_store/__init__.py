"""The builtin SQLite store: every role of ``soulacy_store`` in one file.

History with reply metadata, runs and their attempts, tool records and proofs, workflow
checkpoints and plugin state, leases with fencing tokens (checked in the transaction of each
write made under them), cancellation requests and shared counters. Processes of one host share
the file (``SQLiteStore.multi_process``); expiry is judged by that host's clock.

One file per workspace (``store.path``, default ``soulacy.db`` in the workspace)::

    store:
      path: soulacy.db          # relative to the workspace
      busy_timeout: 30s         # how long a writer waits for another process's writer
      synchronous: NORMAL       # or FULL: an fsync per commit, slower, survives power loss

Replace it by disabling it (``-p no:sqlite_store``) and loading another store plugin; with it
disabled and none other, the kernel keeps everything in memory. The commands that read the
store (``soulacy history``, ``runs``, ``runs show``) belong to the core and work with any store;
their kernel is read-only, and so is the store it gets here: it creates and changes no file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from soulacy.kernel import ConfigIssue, Duration, Location, StashKey, hookimpl, lazy_exports

if TYPE_CHECKING:  # the store imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import ConfigSection, Kernel, Settings

    from ._schema import SCHEMA_VERSION
    from ._store import SQLiteStore

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "StoreConfig"]
_LAZY = {"SCHEMA_VERSION": "._schema", "SQLiteStore": "._store"}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


@attrs.frozen
class StoreConfig:
    path: str = "soulacy.db"
    busy_timeout: Duration = Duration(30)
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"


_store_key = StashKey["SQLiteStore"]("sqlite_store")  # the kernel's store, in kernel.stash


def store_of(kernel: Kernel) -> SQLiteStore:
    """The kernel's store: one per kernel, serving every storage hook."""
    store = kernel.stash.get(_store_key, None)
    if store is None:
        from ._store import SQLiteStore

        config: StoreConfig = kernel.config.section("store")
        store = SQLiteStore(
            kernel.workspace / config.path,
            busy_timeout=config.busy_timeout.seconds,
            synchronous=config.synchronous,
            # A kernel of a read command (`soulacy runs`, `history` …) creates no file.
            read_only=kernel.read_only,
        )
        store.start_soon = kernel.start_soon
        kernel.stash[_store_key] = store
    return store


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    return [ConfigSection("store", StoreConfig, doc="the SQLite store")]


# SQLite takes its busy timeout as a 32-bit count of milliseconds.
MAX_BUSY_TIMEOUT = Duration((2**31 - 1) // 1000)


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    timeout: Duration = config.section("store").busy_timeout
    if timeout.seconds > MAX_BUSY_TIMEOUT.seconds:
        where = config.source_of("store.busy_timeout") or Location(str(config.file))
        expected = "at most 596h31m23s (SQLite counts it in 32-bit milliseconds)"
        return [ConfigIssue(where, "store.busy_timeout", expected, str(timeout), True)]
    return []


@hookimpl
async def soulacy_unconfigure(kernel: Kernel) -> None:
    # Kept in the stash: a kernel used after closing reuses (reopens) it.
    store = kernel.stash.get(_store_key, None)
    if store is not None:
        await store.aclose()


@hookimpl
def soulacy_store(kernel: Kernel) -> SQLiteStore:
    return store_of(kernel)
