"""The builtin compactor: extractive context compaction under the input allowance.

Before every model call the engine asks the run's compactor for the view to send. Under the
input allowance (context window minus the output reservation) that is the run's messages as
they are. Over it, the view keeps the system instructions, the goal, the latest request and the
newest tool exchanges, and stands labelled excerpts and exact omission markers in for older
messages; a tool result too large on its own is cut to a head and a tail, flagged
``meta["truncated"]``. No model is called and the run's messages are never changed. See
docs/compaction.md. Configure it in config.yaml::

    compaction:
      chars_per_token: 4.0          # the token estimate, when no plugin supplies a tokenizer
      message_overhead_tokens: 4
      keep_recent_exchanges: 2      # newest exchanges always kept (results cut if needed)
      excerpt_chars: 1000           # at most this much of each older message is excerpted
      max_excerpts: 8

Each model call whose view was compacted is announced by a ``context.compacted`` event of the
run, before its ``llm.call``: ``{"turn", "messages_before", "messages_after", "tokens_before",
"tokens_after", "allowance"}`` (tokens are the compactor's calibrated estimates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulacy.kernel import ConfigIssue, ConfigSection, Settings, hookimpl

from . import hookspecs
from ._compactor import COMPACTED, Compaction, ExtractiveCompactor
from ._config import MIN_KEPT_CHARS, CompactionConfig, validate
from ._excerpt import Excerpt, cut, omission_line
from ._markers import PREFIX
from ._tokens import CharEstimate, TokenCounter, render

if TYPE_CHECKING:  # the kernel and the engine import trio: registering does not (decision 0038)
    import pluggy

    from soulacy.kernel import Kernel
    from soulacy.kernel.engine import Run

__all__ = [
    "COMPACTED",
    "MIN_KEPT_CHARS",
    "PREFIX",
    "CharEstimate",
    "Compaction",
    "CompactionConfig",
    "Excerpt",
    "ExtractiveCompactor",
    "TokenCounter",
    "cut",
    "omission_line",
    "render",
]


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # soulacy_compaction_token_counter


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("compaction", CompactionConfig, doc="extractive context compaction")]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    return validate(config)


@hookimpl
def soulacy_compactor(kernel: Kernel, run: Run) -> ExtractiveCompactor:
    config: CompactionConfig = kernel.config.section("compaction")
    counter: TokenCounter | None = kernel.hook.soulacy_compaction_token_counter(
        kernel=kernel, run=run
    )
    policy = run.policy
    return ExtractiveCompactor(
        config,
        counter,
        goal=lambda: run.first_new,  # read at each call: the engine sets it after this hook
        window=policy.context_window.value,
        reserve=policy.max_output_tokens.value,
    )
