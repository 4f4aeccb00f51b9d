"""The contracts of the run's seams: what per-run hooks return and what the engine expects.

Hook specifications (``soulacy.kernel.hookspecs``) are typed with these, so a replacement
plugin is checked by mypy against the same protocol the builtin implements. The store
protocols live with the store records (:mod:`soulacy.kernel.store`), the resolved policy in
:mod:`soulacy.kernel.policy`, the provider protocol in :mod:`soulacy.kernel.providers`: each
name has one public home, where its implementers look for it.
"""

from ._contracts import (
    ApprovalKeeper,
    Compactor,
    ContextOverflow,
    Decided,
    DecisionKeywords,
    Happened,
    ProgressDetector,
    Refusal,
    RunParticipant,
    RunStrategy,
    ToolLoop,
    Verdict,
    VerdictKind,
)

__all__ = [
    "ApprovalKeeper",
    "Compactor",
    "ContextOverflow",
    "Decided",
    "DecisionKeywords",
    "Happened",
    "ProgressDetector",
    "Refusal",
    "RunParticipant",
    "RunStrategy",
    "ToolLoop",
    "Verdict",
    "VerdictKind",
]
