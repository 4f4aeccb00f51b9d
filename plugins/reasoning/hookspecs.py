"""The hook the reasoning plugin adds for other plugins (through ``soulacy_addhooks``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from soulacy.kernel import hookspec


@hookspec
def soulacy_reasoning_strategies() -> Mapping[str, Callable[[Any], Awaitable[None]]]:
    """Contribute reasoning strategies by name (SOUL.yaml ``reasoning.strategy``): async
    callables that drive a run as run strategies do. Every plugin's mapping is collected; a
    name defined twice is an error naming both plugins.
    """
