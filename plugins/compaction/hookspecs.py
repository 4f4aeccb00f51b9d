"""The hook the compaction plugin defines for other plugins (added with ``soulacy_addhooks``)."""

from __future__ import annotations

from typing import Any

from soulacy.kernel import hookspec


@hookspec(firstresult=True)
def soulacy_compaction_token_counter(kernel: Any, run: Any) -> Any:
    """Return the token counter of one run's builtin compactor: a callable ``(text) -> int``,
    such as an exact tokenizer for the run's model, or None to leave it to others.

    Called once per run, next to ``soulacy_compactor``; the first non-None result wins.
    Without one, the compactor estimates ``ceil(characters / compaction.chars_per_token)``.
    Either way a message also costs ``compaction.message_overhead_tokens``, and the estimate is
    calibrated against the provider's reported input tokens. Mark an implementation
    ``@hookimpl(optionalhook=True)`` so that it still loads with the compaction plugin disabled.
    """
