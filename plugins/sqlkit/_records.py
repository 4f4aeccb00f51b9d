"""Checkpoints, plugin state, counters and approvals: the shared statements of their stores."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    Checkpoint,
    EveryPrincipal,
    Lease,
)

from ._base import C, SQLBase, principal_filter
from ._codecs import APPROVAL, dumps, epoch, loads
from ._dialect import Dialect


def _evidence(evidence: str | None, legacy_state: str | None) -> Any:
    """A checkpoint's evidence; the original system kept a step's result in ``state``."""
    if evidence is not None:
        return loads(evidence)
    if legacy_state is None:
        return None
    try:
        return {"result": json.loads(legacy_state)}
    except ValueError:
        return {"result": legacy_state}


_STATE_ROW = "(key, value, updated_at, run_id)"
_STATE_SET = (
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at,"
    " run_id = excluded.run_id"
)


def state_upsert(d: Dialect, where: str | None = None) -> str:
    """The statement that writes one state row, replacing the key's (arguments: the key, the
    value as JSON, the run id), in ``d``'s placeholders; with ``where``, only while that
    condition holds (its own arguments after those three)."""
    if where is None:
        return d.sql(f"INSERT INTO plugin_state {_STATE_ROW} VALUES (?, ?, {d.now}, ?){_STATE_SET}")
    return d.sql(
        f"INSERT INTO plugin_state {_STATE_ROW} SELECT ?, ?, {d.now}, ? WHERE {where}{_STATE_SET}"
    )


class RecordsMixin(SQLBase[C]):
    # The original system's column of a step's result (SQLite's files), or NULL.
    legacy_state: ClassVar[str] = "NULL"

    # -- checkpoint store ------------------------------------------------------------------------

    async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
        d = self.dialect
        sql = d.sql(
            "SELECT step_id, status, agent_id, evidence, identity, updated_at,"
            f" {self.legacy_state} FROM workflow_checkpoints WHERE run_id = ?"
            f" ORDER BY {d.insertion_order}"
        )

        def read(conn: C) -> list[Checkpoint]:
            return [
                Checkpoint(
                    run_id,
                    step_id,
                    status,
                    agent_id or "",
                    _evidence(evidence, state),
                    loads(identity),
                    epoch(updated_at),
                )
                for step_id, status, agent_id, evidence, identity, updated_at, state in (
                    conn.execute(sql, (run_id,)).fetchall()
                )
            ]

        return await self._read("load checkpoints", read)

    async def save_checkpoint(self, checkpoint: Checkpoint, fence: Lease | None = None) -> None:
        c = checkpoint
        row = (
            c.agent_id,
            c.run_id,
            c.step_id,
            c.status,
            json.dumps(c.evidence, default=str) if c.evidence is not None else None,
            json.dumps(c.identity, sort_keys=True, default=str) if c.identity is not None else None,
            float(c.updated_at),
        )
        sql = self.dialect.sql(
            "INSERT INTO workflow_checkpoints (agent_id, run_id, step_id, status, evidence,"
            " identity, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id,"
            " step_id) DO UPDATE SET agent_id = excluded.agent_id, status = excluded.status,"
            " evidence = excluded.evidence, identity = excluded.identity,"
            " updated_at = excluded.updated_at"
        )

        def write(conn: C) -> None:
            self._check_fence(conn, fence)
            # An upsert keeps the row (and its place in the step order) of a step saved before.
            conn.execute(sql, row)

        await self._write("save checkpoint", write)

    async def discard_checkpoints(self, run_id: str, step_id: str | None = None) -> int:
        where: str = "run_id = ?"
        args: tuple[str, ...] = (run_id,)
        if step_id is not None:
            where, args = "run_id = ? AND step_id = ?", (run_id, step_id)
        sql = self.dialect.sql(f"DELETE FROM workflow_checkpoints WHERE {where}")

        def write(conn: C) -> int:
            return max(int(conn.execute(sql, args).rowcount), 0)

        return await self._write("discard checkpoints", write)

    async def load_state(self, key: str) -> Mapping[str, Any] | None:
        sql = self.dialect.sql("SELECT value FROM plugin_state WHERE key = ?")

        def read(conn: C) -> Mapping[str, Any] | None:
            row = conn.execute(sql, (key,)).fetchone()
            return json.loads(row[0]) if row else None

        return await self._read("read state", read)

    async def save_state(
        self,
        key: str,
        value: Mapping[str, Any],
        fence: Lease | None = None,
        *,
        run_id: str | None = None,
    ) -> None:
        args: tuple[Any, ...] = (key, dumps(value), run_id)
        if fence is None:
            sql = state_upsert(self.dialect)
        else:
            # One statement under the lease, its own transaction (an engine saves a run's
            # state every tool turn): the row only while the lease holds.
            sql = state_upsert(self.dialect, self._fenced())
            args += (fence.key, fence.token, fence.owner.id)

        if not await self._statement("save state", sql, args) and fence is not None:
            await self._read("save state", lambda conn: self._lease_lost(conn, fence))

    # -- counter store ---------------------------------------------------------------------------

    async def counter(self, key: str) -> float:
        sql = self.dialect.sql("SELECT total FROM counters WHERE key = ?")

        def read(conn: C) -> float:
            row = conn.execute(sql, (key,)).fetchone()
            return float(row[0]) if row else 0.0

        return await self._read("read counter", read)

    # -- approval store --------------------------------------------------------------------------

    def _approvals(self, conn: C, where: str, args: tuple[Any, ...]) -> list[ApprovalRequest]:
        d = self.dialect
        sql = d.sql(
            f"SELECT {APPROVAL.select()} FROM tool_approvals WHERE {where}"
            f" ORDER BY {d.insertion_order}"
        )
        return [APPROVAL.decode(r) for r in conn.execute(sql, args).fetchall()]

    def _approval_where(
        self, run_id: str, call_id: str, principal: str | EveryPrincipal | None
    ) -> tuple[str, tuple[Any, ...]]:
        clauses, args = principal_filter(self.dialect, "principal", principal)
        return " AND ".join(["run_id = ? AND call_id = ?", *clauses]), (run_id, call_id, *args)

    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        r, text = request, self.dialect.text
        row = (
            r.run_id,
            r.call_id,
            text(r.tool),
            text(json.dumps(dict(r.arguments), sort_keys=True, default=str)),
            r.agent_id,
            r.session_id,
            r.principal,
            r.user_id,
            text(json.dumps(dict(r.request), sort_keys=True, default=str)),
            text(json.dumps(list(r.reasons))),
            r.requested_at,
        )
        sql = self.dialect.sql(
            "INSERT INTO tool_approvals (run_id, call_id, tool, arguments, agent_id,"
            " session_id, principal, user_id, request, reasons, requested_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, call_id) DO NOTHING"
        )

        def write(conn: C) -> ApprovalRequest:
            self._check_fence(conn, fence)
            conn.execute(sql, row)
            return self._approvals(conn, "run_id = ? AND call_id = ?", (r.run_id, r.call_id))[0]

        return await self._write("request approval", write)

    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        where, args = self._approval_where(run_id, call_id, principal)
        d = self.dialect
        sql = d.sql(
            "UPDATE tool_approvals SET approved = ?, approver = ?, decided_by = ?,"
            f" note = ?, result = ?, decided_at = {d.now} WHERE run_id = ? AND call_id = ?"
            " AND approved IS NULL"
        )
        values = (
            decision.approved,
            d.text(decision.approver),
            decision.decided_by,
            None if decision.note is None else d.text(decision.note),
            None if decision.result is None else d.text(decision.result),
            run_id,
            call_id,
        )

        def write(conn: C) -> ApprovalRequest | None:
            if not self._approvals(conn, where, args):
                return None
            # Of two deciders, the second (after the first's commit: the writer lock, or the
            # row lock re-checked) finds the call decided and changes nothing.
            cursor = conn.execute(sql, values)
            found = self._approvals(conn, where, args)[0]
            if cursor.rowcount != 1:
                raise AlreadyDecided(found)
            return found

        return await self._write("decide approval", write)

    async def get_approval(
        self,
        run_id: str,
        call_id: str,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        where, args = self._approval_where(run_id, call_id, principal)
        found = await self._read("read approval", lambda conn: self._approvals(conn, where, args))
        return found[0] if found else None

    async def list_approvals(
        self,
        run_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
        *,
        pending: bool = False,
    ) -> list[ApprovalRequest]:
        clauses, args = principal_filter(self.dialect, "principal", principal)
        if run_id is not None:
            clauses.insert(0, "run_id = ?")
            args.insert(0, run_id)
        if pending:
            clauses.append("approved IS NULL")
        where = " AND ".join(clauses) or "TRUE"
        return await self._read(
            "read approvals", lambda conn: self._approvals(conn, where, tuple(args))
        )
