"""``soulacy serve`` takes its start-up heap out of the cyclic collector's generations once its
services run (docs/performance/0084-serve-freezes-its-start-up-heap.md): each full collection of
a long-lived server then walks only what was made since, and no garbage is frozen with it."""

from __future__ import annotations

import gc
import weakref

from soulacy.plugins.core._run import freeze_startup_heap


class Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_what_start_up_made_is_frozen_and_its_garbage_collected_first() -> None:
    kept = Node()
    dropped = Node()
    gone = weakref.ref(dropped)
    del dropped
    try:
        freeze_startup_heap()
        assert gone() is None, "garbage of start-up was frozen instead of collected"
        assert not any(o is kept for o in gc.get_objects()), "a live object was not frozen"
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test's process is not a server: give the collector its objects back
    assert any(o is kept for o in gc.get_objects())
