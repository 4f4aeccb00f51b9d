"""The kernel's stash: typed per-kernel plugin state, as pytest's ``config.stash``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from soulacy.kernel import Kernel
from soulacy.kernel._stash import Stash, StashKey


def test_a_stash_holds_one_value_per_key() -> None:
    stash = Stash()
    count, names = StashKey[int]("count"), StashKey[list[str]]()
    assert count not in stash
    assert stash.get(count, None) is None
    with pytest.raises(KeyError):
        stash[count]
    stash[count] = 1
    assert stash[count] == 1
    assert stash.setdefault(count, 5) == 1  # already set: kept
    assert stash.setdefault(names, ["a"]) == ["a"]
    stash[names].append("b")
    assert stash[names] == ["a", "b"]
    assert len(stash) == 2
    del stash[count]
    assert count not in stash
    assert stash.pop(names, None) == ["a", "b"]
    assert stash.pop(names, None) is None
    assert len(stash) == 0


def test_keys_are_objects_two_keys_of_one_name_never_collide() -> None:
    stash = Stash()
    first, second = StashKey[str]("same"), StashKey[str]("same")
    stash[first] = "one"
    stash[second] = "two"
    assert (stash[first], stash[second]) == ("one", "two")
    assert "same" in repr(first)


def test_each_kernel_has_its_own_stash(make_kernel: Callable[..., Kernel]) -> None:
    key = StashKey[str]()
    one, two = make_kernel(), make_kernel()
    one.stash[key] = "one's"
    assert key not in two.stash
    assert one.sibling(one.workspace).stash is not one.stash  # a sibling starts empty too
