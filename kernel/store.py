"""Public names for store plugins: records, protocols, errors, proofs and the memory store."""

from ._store import (
    RECEIPT_FIELD_CHARS,
    ConversationStore,
    HistoryEntry,
    MemoryStore,
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
    "RECEIPT_FIELD_CHARS",
    "ConversationStore",
    "HistoryEntry",
    "MemoryStore",
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
