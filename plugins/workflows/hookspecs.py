"""The hook the workflows plugin defines for other plugins (added with ``soulacy_addhooks``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soulacy.kernel import hookspec

from ._assertions import Operator


@hookspec
def soulacy_assertion_operators() -> Mapping[str, Operator] | Any:
    """Contribute outcome-assertion operators as a mapping of name to a predicate
    ``(actual, expected) -> bool``.

    Every plugin's mapping is collected; two plugins defining the same operator is an error
    that names both. Mark an implementation ``@hookimpl(optionalhook=True)`` so that it still
    loads with the workflows plugin disabled.
    """
