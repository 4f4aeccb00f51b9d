"""The SQLite plugin keeps its store in the kernel's stash: two kernels share nothing."""

from __future__ import annotations

from pathlib import Path

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Message
from soulacy.kernel.store import RunRecord
from soulacy.plugins import sqlite_store


def _kernel(folder: Path) -> Kernel:
    folder.mkdir()
    return Kernel.load(folder, autoload=False, environ={})


async def test_two_kernels_on_two_workspaces_get_two_stores(tmp_path: Path) -> None:
    one, two = _kernel(tmp_path / "one"), _kernel(tmp_path / "two")
    try:
        first, second = one.store(), two.store()
        assert isinstance(first, sqlite_store.SQLiteStore)
        assert first is not second
        assert first is one.store()  # one store per kernel, playing every role
        assert first is sqlite_store.store_of(one)
        run = RunRecord("r1", "helper", "s1")
        await first.start_run(run)
        await first.record_turn(run, [Message("user", "only in one")], [])
        assert [e.content for e in await first.history("s1")] == ["only in one"]
        assert await second.history("s1") == []  # the other workspace's file
        assert (tmp_path / "one" / "soulacy.db").is_file()
    finally:
        await one.aclose()
        await two.aclose()


async def test_a_kernel_gone_takes_its_store_with_it(tmp_path: Path) -> None:
    """No module-level dictionary holds a store: the kernel's stash is the only place."""
    kernel = _kernel(tmp_path / "w")
    store = kernel.store()
    await kernel.aclose()
    assert not hasattr(sqlite_store, "_stores")
    assert sqlite_store.store_of(kernel) is store  # kept: a kernel used after closing reopens it
