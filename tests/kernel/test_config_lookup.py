"""``Settings.get``: dotted sections win over their parents, and the key order is computed once
(every policy resolution reads some twenty keys)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from soulacy.kernel import Settings
from soulacy.kernel._config import SourceMap


class CountingValues(dict[str, Any]):
    """A values mapping that counts how often its keys are walked."""

    walks = 0

    def __iter__(self) -> Iterator[str]:
        CountingValues.walks += 1
        return super().__iter__()


@attrs.frozen
class Store:
    path: str = "soulacy.db"


def settings(values: dict[str, Any]) -> Settings:
    return Settings(Path("config.yaml"), values, SourceMap())


def test_a_dotted_section_wins_over_its_parent() -> None:
    config = settings({"store": {"path": "parent", "sqlite": "hidden"}, "store.sqlite": Store()})
    assert config.get("store.sqlite.path") == "soulacy.db"
    assert config.get("store.path") == "parent"
    assert config.get("store.sqlite") == Store()


def test_an_unknown_key_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match=r"unknown configuration key 'nowhere\.x'"):
        settings({"store": Store()}).get("nowhere.x")


def test_the_key_order_is_computed_once() -> None:
    values = CountingValues({"runtime": {"a": 1}, "store": Store(), "store.sqlite": Store()})
    config = settings(values)
    walked = CountingValues.walks
    for _ in range(50):
        assert config.get("runtime.a") == 1
    assert CountingValues.walks == walked


def test_a_changed_copy_orders_its_own_keys() -> None:
    config = settings({"store": {"path": "parent"}})
    changed = attrs.evolve(config, values={"store": {"path": "p"}, "store.path": "own"})
    assert (config.get("store.path"), changed.get("store.path")) == ("parent", "own")
