"""The builtin pass-through compactor: the ``trylast`` default of ``soulacy_compactor``.

It sends the run's messages as they are. It is its own builtin plugin (``passthrough``), not a
part of ``compaction``, so that blocking the extractive compactor (``-p no:compaction``) leaves
runs working as before, and blocking both leaves the choice explicit: a run then fails with a
PluginError naming the hook.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulacy.kernel import hookimpl

if TYPE_CHECKING:  # the kernel and the engine import trio: registering does not (decision 0038)
    from soulacy.kernel import Kernel
    from soulacy.kernel.engine import Run
    from soulacy.kernel.messages import Message, ToolSpec

__all__ = ["PassThrough"]


class PassThrough:
    """A compactor that sends the messages as they are, whatever the allowance."""

    def compact(
        self, messages: Sequence[Message], allowance: int | None, tools: Sequence[ToolSpec] = ()
    ) -> Sequence[Message]:
        return messages


_PASS_THROUGH = PassThrough()  # stateless: one serves every run


@hookimpl(trylast=True)
def soulacy_compactor(kernel: Kernel, run: Run) -> PassThrough:
    return _PASS_THROUGH
