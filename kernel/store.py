"""Public names for store plugins: records, protocols, errors and proofs.

The in-memory store is the builtin plugin `soulacy.plugins.memory_store` (`MemoryStore`).
"""

from ._conversations import ConversationKey
from ._store import (
    EVERY_PRINCIPAL,
    RECEIPT_FIELD_CHARS,
    Checkpoint,
    CheckpointStatus,
    CheckpointStore,
    Claim,
    ClaimOwner,
    ConversationStore,
    EveryPrincipal,
    HistoryEntry,
    ProofRecord,
    ProofStore,
    RunRecord,
    StorageError,
    ToolRecord,
    bounded,
    canonical_json,
    make_proof,
    receipt,
)

__all__ = [
    "EVERY_PRINCIPAL",
    "RECEIPT_FIELD_CHARS",
    "Checkpoint",
    "CheckpointStatus",
    "CheckpointStore",
    "Claim",
    "ClaimOwner",
    "ConversationKey",
    "ConversationStore",
    "EveryPrincipal",
    "HistoryEntry",
    "ProofRecord",
    "ProofStore",
    "RunRecord",
    "StorageError",
    "ToolRecord",
    "bounded",
    "canonical_json",
    "make_proof",
    "receipt",
]
