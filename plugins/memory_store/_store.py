"""The in-memory store: every storage protocol, kept in dictionaries of one process."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    Checkpoint,
    Claim,
    ClaimOwner,
    ConversationKey,
    EveryPrincipal,
    HistoryEntry,
    ProofRecord,
    RunRecord,
    ToolRecord,
    canonical_json,
    make_proof,
)


class MemoryStore:
    """Everything in memory: for tests, demos and ``--no-store`` runs; gone with the process."""

    def __init__(self) -> None:
        self._entries: list[HistoryEntry] = []
        self._by_conversation: dict[ConversationKey, list[HistoryEntry]] = {}
        self._runs: dict[str, RunRecord] = {}
        self._tools: dict[str, dict[str, ToolRecord]] = {}
        self._proofs: dict[str, ProofRecord] = {}
        self._run_metadata: dict[str, dict[str, Any]] = {}
        self._checkpoints: dict[str, dict[str, Checkpoint]] = {}
        self.superseded_proofs: list[ProofRecord] = []
        self._claims: dict[str, ClaimOwner] = {}
        self._state: dict[str, str] = {}

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        key = ConversationKey(agent_id, session_id, principal, user_id)
        return [e.message() for e in self._by_conversation.get(key, ())]

    async def start_run(self, run: RunRecord) -> None:
        self._runs[run.run_id] = run
        superseded = self._proofs.pop(run.run_id, None)  # a retry: a new attempt, a new proof
        if superseded is not None:
            self.superseded_proofs.append(superseded)

    async def record_turn(
        self, run: RunRecord, messages: Sequence[Message], tools: Sequence[ToolRecord]
    ) -> None:
        key = ConversationKey(run.agent_id, run.session_id, run.principal, run.user_id)
        conversation = self._by_conversation.setdefault(key, [])
        for m in messages:
            entry = HistoryEntry(
                len(self._entries) + 1,
                run.agent_id,
                run.session_id,
                run.run_id,
                m.role,
                m.content,
                None,
                time.time(),
                None,
                m.tool_call_id,
                [
                    {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                    for c in m.tool_calls
                ],
                m.name,
                m.is_error,
                run.principal,
                run.user_id,
            )
            self._entries.append(entry)
            conversation.append(entry)
        for record in tools:
            self._tools.setdefault(record.run_id, {})[record.call_id] = record

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        return dict(self._tools.get(run_id, {}))

    async def finish_run(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            self._runs[run_id] = attrs.evolve(
                run,
                status=metadata.get("status", run.status),
                verification=metadata.get("verification"),
                incomplete_reason=metadata.get("incomplete_reason"),
                metadata=dict(metadata),
                finished_at=time.time(),
            )
        self._run_metadata[run_id] = dict(metadata)

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        entries = (
            attrs.evolve(e, metadata=self._run_metadata.get(e.run_id or ""))
            for key, entries in self._by_conversation.items()
            for e in entries
            if key.session_id == session_id
            and (agent_id is None or key.agent_id == agent_id)
            and (principal is EVERY_PRINCIPAL or key.principal == principal)
        )
        return sorted(entries, key=lambda e: e.id)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return self._runs.get(run_id)

    async def list_runs(self, limit: int = 50, agent_id: str | None = None) -> list[RunRecord]:
        runs = [r for r in self._runs.values() if agent_id is None or r.agent_id == agent_id]
        return sorted(runs, key=lambda r: r.started_at, reverse=True)[:limit]

    async def finalize_proof(
        self, run_id: str, metadata: Mapping[str, Any], assertions: Sequence[Mapping[str, Any]] = ()
    ) -> ProofRecord:
        if run_id not in self._proofs:
            records = list(self._tools.get(run_id, {}).values())  # in call order
            self._proofs[run_id] = make_proof(run_id, metadata, records, assertions)
        return self._proofs[run_id]

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        return self._proofs.get(run_id)

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        return list(self._checkpoints.get(run_id, {}).values())

    async def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        self._checkpoints.setdefault(checkpoint.run_id, {})[checkpoint.step_id] = checkpoint

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        steps = self._checkpoints.get(run_id, {})
        if step_id is None:
            return len(self._checkpoints.pop(run_id, {}))
        return 1 if steps.pop(step_id, None) is not None else 0

    async def try_claim(self, key: str, owner: ClaimOwner) -> Claim:
        holder = self._claims.get(key)
        if holder is None or holder == owner or holder.provably_gone():
            self._claims[key] = owner
            gone = holder if holder is not None and holder != owner else None
            return Claim(key, True, owner, gone)
        return Claim(key, False, holder)

    async def heartbeat(self, key: str, owner: ClaimOwner) -> None:
        return None  # one process: nothing to prove to others

    async def release_claim(self, key: str, owner: ClaimOwner) -> None:
        if self._claims.get(key) == owner:
            del self._claims[key]

    async def claim_holder(self, key: str) -> ClaimOwner | None:
        return self._claims.get(key)

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        value = self._state.get(key)
        return json.loads(value) if value is not None else None

    async def save_state(self, key: str, value: Mapping[str, Any]) -> None:
        self._state[key] = canonical_json(value)  # stored as JSON, as a durable store would
