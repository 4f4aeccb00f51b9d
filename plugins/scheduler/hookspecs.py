"""The hooks the scheduler plugin defines for other plugins (added with ``soulacy_addhooks``).

They are the scheduler's extension points, so they live with it rather than in the kernel's
specification: with the scheduler disabled nobody calls them (mark implementations
``@hookimpl(optionalhook=True)`` so that they still load then).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import hookspec

if TYPE_CHECKING:
    from soulacy.kernel import Kernel

    from ._model import ScheduleEntry


@hookspec
def soulacy_schedules(kernel: Kernel) -> Sequence[ScheduleEntry]:
    """Contribute schedules (beyond the ``schedule:`` keys of SOUL.yaml), such as monitors.

    Every plugin's list is collected by the scheduler service.
    """


@hookspec
def soulacy_schedule_finished(
    kernel: Kernel, schedule: ScheduleEntry, result: Mapping[str, Any]
) -> Awaitable[None] | None:
    """A scheduled run has really exited (its ownership is released right after). Observers
    only; every implementation is called and may be ``async def`` (the scheduler awaits it).
    """
