"""What stores keep and the protocols they implement.

One object may serve all three storage hooks (the SQLite plugin's does): conversation history
with reply metadata and runs; tool records and proofs; workflow checkpoints. Failures are
raised as :class:`StorageError`, never read as "no data". The in-memory store is a builtin
plugin (``soulacy.plugins.memory_store``), the trylast default of the three hooks.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, cast

import attrs

from ._errors import SoulacyError
from ._messages import Message, Role, ToolCall

RECEIPT_FIELD_CHARS = 4000  # each text field of a receipt is bounded; the count of receipts is not


class StorageError(SoulacyError):
    """A store could not read or write (locked, read-only, full, corrupt …)."""


@attrs.frozen
class RunRecord:
    """A run's identity and how it ended (``status`` is ``running`` until it does)."""

    run_id: str
    agent_id: str
    session_id: str
    user_id: str | None = None
    principal: str | None = None
    status: str = "running"
    verification: str | None = None
    incomplete_reason: str | None = None
    metadata: Mapping[str, Any] | None = None
    started_at: float = attrs.field(factory=time.time)
    finished_at: float | None = None


@attrs.frozen
class HistoryEntry:
    """One stored message of a conversation, with the reply metadata of its run once known."""

    id: int
    agent_id: str
    session_id: str
    run_id: str | None
    role: str
    content: str
    tokens: int | None
    created_at: float
    metadata: Mapping[str, Any] | None = None
    tool_call_id: str | None = None
    tool_calls: Sequence[Mapping[str, Any]] = ()
    name: str | None = None
    is_error: bool = False
    principal: str | None = None  # whose conversation it is: part of the conversation key
    user_id: str | None = None

    def message(self) -> Message:
        calls = tuple(ToolCall(c["id"], c["name"], c.get("arguments", {})) for c in self.tool_calls)
        role = cast("Role", self.role)
        return Message(role, self.content, calls, self.tool_call_id, self.name, self.is_error)


@attrs.frozen
class ToolRecord:
    """An executed tool call, by id: replay of the same id reuses it, even after a restart."""

    run_id: str
    call_id: str
    name: str
    arguments: Mapping[str, Any]
    content: str
    is_error: bool
    created_at: float = attrs.field(factory=time.time)


@attrs.frozen
class ProofRecord:
    """A run's final proof as canonical JSON, with its sha256."""

    run_id: str
    sha256: str
    body: str  # canonical JSON
    receipts: int
    created_at: float = attrs.field(factory=time.time)

    def data(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.body)
        return value


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same data always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def bounded(text: str, limit: int = RECEIPT_FIELD_CHARS) -> tuple[str, bool]:
    """Cut ``text`` to ``limit`` characters with a marker saying how much was cut."""
    if len(text) <= limit:
        return text, False
    dropped = len(text) - limit
    return f"{text[:limit]}…[{dropped} more characters not kept]", True


def receipt(record: ToolRecord) -> dict[str, Any]:
    """A proof receipt of one tool call: every call is kept, each text field bounded."""
    arguments, args_cut = bounded(canonical_json(record.arguments))
    result, result_cut = bounded(record.content)
    out: dict[str, Any] = {
        "call_id": record.call_id,
        "tool": record.name,
        "arguments": arguments,
        "result": result,
        "is_error": record.is_error,
        "at": record.created_at,
    }
    if args_cut or result_cut:
        out["truncated"] = {
            "arguments": args_cut,
            "result": result_cut,
            "result_chars": len(record.content),
        }
    return out


def make_proof(
    run_id: str,
    metadata: Mapping[str, Any],
    records: Sequence[ToolRecord],
    assertions: Sequence[Mapping[str, Any]] = (),
) -> ProofRecord:
    """Build the proof of a finished run from its tool records (in call order)."""
    body = canonical_json(
        {
            "run_id": run_id,
            "agent_id": metadata.get("agent_id"),
            "session_id": metadata.get("session_id"),
            "status": metadata.get("status"),
            "verification": metadata.get("verification"),
            "incomplete_reason": metadata.get("incomplete_reason"),
            "assertions": list(assertions),
            "receipts": [receipt(r) for r in records],
        }
    )
    return ProofRecord(run_id, hashlib.sha256(body.encode()).hexdigest(), body, len(records))


CheckpointStatus = Literal["pending", "in_progress", "completed", "failed"]


@attrs.frozen
class Checkpoint:
    """One workflow step of a run. ``identity`` None marks a checkpoint written without a
    verified request identity (by an earlier version): it needs reconciliation before reuse."""

    run_id: str
    step_id: str
    status: CheckpointStatus
    agent_id: str = ""
    evidence: Mapping[str, Any] | None = None
    identity: Mapping[str, Any] | None = None
    updated_at: float = attrs.field(factory=time.time)


@attrs.frozen
class ClaimOwner:
    """Who holds a claim: a process (``pid`` on ``host``) and a kernel within it (``id``)."""

    id: str
    pid: int
    host: str

    @classmethod
    def current(cls, owner_id: str) -> ClaimOwner:
        return cls(owner_id, os.getpid(), socket.gethostname())

    def provably_gone(self) -> bool:
        """True only when this owner's process is known to have exited (same host, no pid)."""
        if self.host != socket.gethostname():
            return False  # another machine's process cannot be proven gone from here
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


@attrs.frozen
class Claim:
    """The outcome of a claim attempt: ``acquired``, the holder, and a takeover if one happened."""

    key: str
    acquired: bool
    holder: ClaimOwner | None
    took_over_from: ClaimOwner | None = None


class CheckpointStore(Protocol):
    """Workflow checkpoints and claims (``soulacy_checkpoint_store``)."""

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        """The checkpoints of a run, in the order their steps were first saved."""

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Insert or replace the checkpoint of (run, step), committed before returning."""

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        """Delete a run's checkpoints (or one step's); returns how many."""

    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        """Take ``key`` if it is free, already ours, or held by an owner provably gone."""

    async def heartbeat(self, key: str, owner: ClaimOwner) -> None:
        """Say that ``owner`` still holds ``key`` (a store shared between processes records
        the time)."""

    async def release_claim(self, key: str, owner: ClaimOwner) -> None:
        """Release ``key`` if ``owner`` holds it."""

    async def claim_holder(self, key: str) -> ClaimOwner | None:
        """Who holds ``key`` now, if anyone."""

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        """A plugin's small durable state (a schedule's last tick, its failure streak)."""

    async def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        """Replace the state of ``key`` with ``value`` (JSON), committed before returning."""


class EveryPrincipal(enum.Enum):
    """The ``principal`` of a history read that is not limited to one principal (an operator's
    ``soulacy history``); a transport always passes the caller's principal instead."""

    EVERY = "every principal"


EVERY_PRINCIPAL = EveryPrincipal.EVERY


class ConversationStore(Protocol):
    """History with reply metadata, runs and tool records (``soulacy_conversation_store``).

    A conversation is keyed by (agent, session, principal, user): the same session id used by
    another principal or user is another conversation, and no read of one returns the other's
    messages (``None`` is a value of its own, matched only by ``None``).
    """

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        """The messages of one conversation, oldest first, to continue it."""

    async def start_run(self, run: RunRecord) -> None:
        """Record a run as started (status ``running``). A retry of a run id starts a new
        attempt: its previous proof is kept aside and the attempt will get its own."""

    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        """Durably add one turn's messages and executed tool calls, in one step."""

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        """The executed tool calls of a run by call id (replay survives a restart)."""

    async def finish_run(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        """Record how a run ended, and set the reply metadata of its history entries (only
        those of this run)."""

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        """Stored entries of a session with their metadata, oldest first: of one principal
        (its conversations with every agent, or with ``agent_id``), or of every principal."""

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run's record, or None for an unknown run id."""

    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        """Runs newest first (by ``started_at``), at most ``limit``, of ``agent_id`` or of every
        agent."""


class ProofStore(Protocol):
    """Proofs of finished runs (``soulacy_proof_store``)."""

    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Mapping[str, Any]] = ()
    ) -> ProofRecord:
        """Build and store the run's proof from its tool records, once; a second call returns
        the stored proof. Concurrent finalizations wait for each other rather than fail."""

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        """The current attempt's proof, or None (unknown run, not finalized, or a retry
        started)."""
