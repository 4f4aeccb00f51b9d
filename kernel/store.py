"""Public names for store plugins: records, protocols and errors.

The in-memory store is the builtin plugin `soulacy.plugins.memory_store` (`MemoryStore`). How a
store builds a proof (``make_proof``, ``receipt``, ``bounded``, ``RECEIPT_FIELD_CHARS``) is the
proof toolkit's, :mod:`soulacy.plugins.proofkit`; read here, those names still work, with a
DeprecationWarning, for one release.
"""

import warnings

from ._runs import ConversationKey
from ._store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStore,
    CancelRequest,
    Checkpoint,
    CheckpointStatus,
    CheckpointStore,
    ConversationStore,
    CounterStore,
    Ending,
    EveryPrincipal,
    HistoryEntry,
    Lease,
    LeaseGrant,
    LeaseLost,
    LeaseOwner,
    LeaseStore,
    ProofRecord,
    ProofStore,
    Pruned,
    RetentionLimits,
    RetentionStore,
    RunEvent,
    RunEventBatch,
    RunEvents,
    RunEventStore,
    RunIdTaken,
    RunRecord,
    StateRow,
    StorageError,
    Store,
    ToolRecord,
    canonical_json,
    identity_differs,
    label_interrupted,
    record_turn_and_end,
    record_turn_and_state,
    run_as_read,
    takes_ending,
    takes_state,
)

__all__ = [
    "EVERY_PRINCIPAL",
    "AlreadyDecided",
    "ApprovalDecision",
    "ApprovalRequest",
    "ApprovalStore",
    "CancelRequest",
    "Checkpoint",
    "CheckpointStatus",
    "CheckpointStore",
    "ConversationKey",
    "ConversationStore",
    "CounterStore",
    "Ending",
    "EveryPrincipal",
    "HistoryEntry",
    "Lease",
    "LeaseGrant",
    "LeaseLost",
    "LeaseOwner",
    "LeaseStore",
    "ProofRecord",
    "ProofStore",
    "Pruned",
    "RetentionLimits",
    "RetentionStore",
    "RunEvent",
    "RunEventBatch",
    "RunEventStore",
    "RunEvents",
    "RunIdTaken",
    "RunRecord",
    "StateRow",
    "StorageError",
    "Store",
    "ToolRecord",
    "canonical_json",
    "identity_differs",
    "label_interrupted",
    "record_turn_and_end",
    "record_turn_and_state",
    "run_as_read",
    "takes_ending",
    "takes_state",
]

_MOVED = frozenset({"RECEIPT_FIELD_CHARS", "bounded", "make_proof", "receipt"})


def __getattr__(name: str) -> object:
    """A name that moved to :mod:`soulacy.plugins.proofkit`, with a DeprecationWarning."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"soulacy.kernel.store.{name} is deprecated: import {name} from soulacy.plugins.proofkit",
        DeprecationWarning,
        stacklevel=2,
    )
    import soulacy.plugins.proofkit

    return getattr(soulacy.plugins.proofkit, name)
