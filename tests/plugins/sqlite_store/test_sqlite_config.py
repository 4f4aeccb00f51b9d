"""``store.busy_timeout`` fits what SQLite can take (a 32-bit count of milliseconds)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from soulacy.kernel import ConfigError, Kernel
from soulacy.testing import Workspace


def test_a_busy_timeout_sqlite_cannot_take_is_an_error_naming_its_line(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("store:\n  busy_timeout: 1000h\n")
    with pytest.raises(ConfigError) as caught:
        make_kernel()
    assert "config.yaml:2" in str(caught.value)
    assert "store.busy_timeout" in str(caught.value)
    assert "at most 596h31m23s" in str(caught.value)


def test_the_largest_busy_timeout_loads(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("store:\n  busy_timeout: 596h31m23s\n")
    assert make_kernel().config.get("store.busy_timeout").seconds == 2147483
