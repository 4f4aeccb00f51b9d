"""The hook the workflows plugin defines for other plugins (added with ``soulacy_addhooks``)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookspec

if TYPE_CHECKING:  # an annotation only: `soulacy --help` loads this module without the engine
    from soulacy.kernel import Kernel

    from ._assertions import Operator


@hookspec
def soulacy_assertion_operators() -> Mapping[str, Operator] | Any:
    """Contribute outcome-assertion operators as a mapping of name to a predicate
    ``(actual, expected) -> bool``.

    Every plugin's mapping is collected; two plugins defining the same operator is an error
    that names both. Mark an implementation ``@hookimpl(optionalhook=True)`` so that it still
    loads with the workflows plugin disabled.
    """


@hookspec(firstresult=True)
def soulacy_reconcile_step(
    kernel: Kernel, run_id: str, step: str | None, decision: str
) -> Awaitable[str] | None:
    """Record an operator's decision about a workflow step left in progress: ``completed``
    (its action happened: not run again) or ``failed`` (it did not: run again on retry).

    The workflows plugin answers with the awaitable of its ``reconcile`` (what was done, as
    ``soulacy runs reconcile`` prints it; a ``UsageError`` when the run is running elsewhere or
    has no such step). Other plugins (the portal) call it instead of importing workflows.
    """
