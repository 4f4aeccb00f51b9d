"""History, runs and proofs: the shared statements of the conversation and proof stores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from soulacy.kernel.messages import Message
from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    Ending,
    EveryPrincipal,
    HistoryEntry,
    Lease,
    ProofRecord,
    RunIdTaken,
    RunRecord,
    ToolRecord,
    identity_differs,
    run_as_read,
)
from soulacy.plugins.proofkit import make_proof

from ._base import C, SQLBase, principal_filter
from ._codecs import LEASE, PROOF, RUN, dumps

_PREVIOUS = "SELECT attempt, metadata, agent_id, session_id, user_id, principal FROM runs"


class RunsMixin(SQLBase[C]):
    # How a runs listing is ordered (after started_at, newest first).
    runs_order: ClassVar[str] = "r.started_at DESC"
    # SQL giving a new run's first history id (every entry it writes has a greater one), of
    # a schema that keeps it (SQLite's, decision 0047); None: none kept.
    first_history_id: ClassVar[str | None] = None

    async def _entries(self, what: str, where: str, args: tuple[Any, ...]) -> list[HistoryEntry]:
        """The history entries (``h``) that ``where`` keeps, in order, with their metadata;
        ``where`` is written with ``?`` placeholders (``Dialect.sql``)."""
        raise NotImplementedError

    def _tool_records(self, conn: C, run_id: str) -> list[ToolRecord]:
        """The run's tool records in call order; of two with one call id, the first."""
        raise NotImplementedError

    async def load_history(
        self,
        agent_id: str,
        session_id: str,
        principal: str | None = None,
        user_id: str | None = None,
    ) -> list[Message]:
        same = self.dialect.same
        entries = await self._entries(
            "load history",
            f"h.session_id = ? AND h.agent_id = ? AND h.principal {same} ? AND h.user_id {same} ?",
            (session_id, agent_id, principal, user_id),
        )
        return [e.message() for e in entries]

    async def history(
        self,
        session_id: str,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[HistoryEntry]:
        where, args = principal_filter(self.dialect, "h.principal", principal)
        where.insert(0, "h.session_id = ?")
        args.insert(0, session_id)
        if agent_id is not None:
            where.insert(1, "h.agent_id = ?")
            args.insert(1, agent_id)
        return await self._entries("read history", " AND ".join(where), tuple(args))

    def _begin_attempt(self, conn: C, run: RunRecord, fence: Lease | None) -> int:
        """Inside ``start_run``'s transaction: the number of the run's new attempt. A retry with
        the same run id is a new attempt, of the same identity (else RunIdTaken: nothing is
        written); the last attempt's proof is kept aside (never lost) and its ending kept for
        its entries before the run's row is reset."""
        d = self.dialect
        self._check_fence(conn, fence)
        self._lock_run(conn, run.run_id)
        # Read and written in one transaction, the row locked: of two processes starting a
        # fresh id exactly one owns it, and no finish_run slips between read and reset.
        previous = conn.execute(
            d.sql(f"{_PREVIOUS} WHERE run_id = ?{d.for_update}"), (run.run_id,)
        ).fetchone()
        if previous:
            differs = identity_differs(run, previous[2:])
            if differs:  # another request's run id
                raise RunIdTaken(run.run_id, previous[5], differs)
        kept = conn.execute(
            d.sql(
                "INSERT INTO superseded_proofs (run_id, sha256, body, receipts, created_at,"
                f" superseded_at) SELECT run_id, sha256, body, receipts, created_at, {d.now}"
                " FROM proofs WHERE run_id = ?"
            ),
            (run.run_id,),
        ).rowcount
        if kept:  # none kept aside: the run has no proof (a fresh id, nearly always)
            conn.execute(d.sql("DELETE FROM proofs WHERE run_id = ?"), (run.run_id,))
        if not previous:
            return 1
        # One that never ended crashed: its entries read interrupted.
        number, ending = int(previous[0]), previous[1]
        conn.execute(
            d.sql(
                "INSERT INTO attempt_endings (run_id, attempt, metadata) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id, attempt) DO NOTHING"
            ),
            (run.run_id, number, ending or dumps({"status": "interrupted", "attempt": number})),
        )
        return number + 1

    def _start(self, conn: C, run: RunRecord, fence: Lease | None) -> RunRecord:
        """``start_run``'s transaction. lease_token: the fence's, which the run's events of
        earlier attempts are refused by (append_run_events)."""
        d = self.dialect
        attempt = self._begin_attempt(conn, run, fence)
        columns = values = updates = ""
        if self.first_history_id is not None:
            # Kept by a retry (its records of earlier attempts stay found).
            columns, values = ", first_history_id", f", {self.first_history_id}"
            updates = (
                ", first_history_id = COALESCE(runs.first_history_id, excluded.first_history_id)"
            )
        stored = conn.execute(
            d.sql(
                "INSERT INTO runs (run_id, agent_id, session_id, user_id, principal, status,"
                f" started_at, attempt, lease_key, lease_token{columns}) VALUES (?, ?, ?, ?, ?,"
                f" 'running', ?, ?, ?, ?{values}) ON CONFLICT (run_id) DO UPDATE SET"
                " status = 'running', verification = NULL, incomplete_reason = NULL,"
                " metadata = NULL, finished_at = NULL, attempt = excluded.attempt,"
                " lease_key = excluded.lease_key, lease_token = excluded.lease_token"
                f"{updates} RETURNING {RUN.select()}"
            ),
            (
                run.run_id,
                run.agent_id,
                run.session_id,
                run.user_id,
                run.principal,
                float(run.started_at),
                attempt,
                fence.key if fence is not None else run.lease_key,
                fence.token if fence is not None else None,
            ),
        ).fetchall()  # all of it: the statement is done before COMMIT
        return RUN.decode(stored[0])

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        return await self._write("start run", lambda conn: self._start(conn, run, fence))

    async def finish_run(
        self, run_id: str, metadata: Mapping[str, Any], fence: Lease | None = None
    ) -> None:
        body = dumps(metadata)

        def write(conn: C) -> None:
            self._check_fence(conn, fence)
            self._finish(conn, run_id, metadata, body)

        await self._write("finish run", write)

    def _finish(self, conn: C, run_id: str, metadata: Mapping[str, Any], body: str) -> None:
        """How the run ended (``body``: ``metadata`` encoded), in the caller's transaction,
        its fence asked."""
        d = self.dialect
        finished = conn.execute(
            d.sql(
                "UPDATE runs SET status = ?, verification = ?, incomplete_reason = ?,"
                f" metadata = ?, finished_at = {d.now} WHERE run_id = ?"
            ),
            (
                metadata.get("status"),
                metadata.get("verification"),
                metadata.get("incomplete_reason"),
                body,
                run_id,
            ),
        )
        # One row, whatever the run's length: the entries of its current attempt read it
        # from there (joined on read), another run's and an earlier attempt's never do.
        if finished.rowcount == 0:  # no record of the run: its entries are attempt 1's
            conn.execute(
                d.sql(
                    "INSERT INTO attempt_endings (run_id, attempt, metadata) VALUES (?, 1, ?)"
                    " ON CONFLICT (run_id, attempt) DO UPDATE SET metadata = excluded.metadata"
                ),
                (run_id, body),
            )

    def _end(self, conn: C, run_id: str, ending: Ending, body: str) -> ProofRecord:
        """``finish_run`` and then ``finalize_proof``, in the caller's transaction (a last
        turn's, ``record_turn(..., ending=)``), its fence asked; ``body``: the metadata
        encoded."""
        self._finish(conn, run_id, ending.metadata, body)
        return self._finalize(conn, run_id, ending.metadata, ending.assertions)

    async def get_run(self, run_id: str) -> RunRecord | None:
        runs = await self._runs("WHERE r.run_id = ?", (run_id,))
        return runs[0] if runs else None

    async def list_runs(
        self,
        limit: int = 50,
        agent_id: str | None = None,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> list[RunRecord]:
        # IS (null-safe): None lists the runs without a principal
        clauses, args = principal_filter(self.dialect, "r.principal", principal)
        if agent_id is not None:
            clauses.insert(0, "r.agent_id = ?")
            args.insert(0, agent_id)
        where = "WHERE " + " AND ".join(clauses) if clauses else ""
        return await self._runs(f"{where} ORDER BY {self.runs_order} LIMIT ?", (*args, limit))

    async def _runs(self, clause: str, args: tuple[Any, ...]) -> list[RunRecord]:
        d = self.dialect
        sql = d.sql(
            f"SELECT {RUN.select('r')}, {LEASE.select('l')}, {d.statement_now}"
            f" FROM runs AS r LEFT JOIN leases AS l ON l.key = r.lease_key {clause}"
        )
        width = len(RUN.names)

        def read(conn: C) -> list[RunRecord]:
            runs = []
            for row in conn.execute(sql, args).fetchall():
                run = RUN.decode(row)
                lease = LEASE.decode(row[width:], key=run.lease_key or "", now=float(row[-1]))
                runs.append(run_as_read(run, lease))
            return runs

        return await self._read("read runs", read)

    async def load_tool_records(self, run_id: str) -> dict[str, ToolRecord]:
        def read(conn: C) -> dict[str, ToolRecord]:
            return {r.call_id: r for r in self._tool_records(conn, run_id)}

        return await self._read("load tool records", read)

    # -- proof store -----------------------------------------------------------------------------

    def _proof(self, conn: C, run_id: str) -> ProofRecord | None:
        row = conn.execute(
            self.dialect.sql(f"SELECT {PROOF.select()} FROM proofs WHERE run_id = ?"), (run_id,)
        ).fetchone()
        return PROOF.decode(row, run_id=run_id) if row else None

    async def finalize_proof(
        self,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]] = (),
        fence: Lease | None = None,
    ) -> ProofRecord:
        def write(conn: C) -> ProofRecord:
            self._check_fence(conn, fence)
            return self._finalize(conn, run_id, metadata, assertions)

        return await self._write("finalize proof", write)

    def _finalize(
        self,
        conn: C,
        run_id: str,
        metadata: Mapping[str, Any],
        assertions: Sequence[Mapping[str, Any]],
    ) -> ProofRecord:
        """The run's proof, made and stored once, in the caller's transaction."""
        self._lock_run(conn, run_id)  # a concurrent finalization waits here, then finds ours
        existing = self._proof(conn, run_id)
        if existing is not None:
            return existing
        proof = make_proof(run_id, metadata, self._tool_records(conn, run_id), assertions)
        conn.execute(
            self.dialect.sql(
                "INSERT INTO proofs (run_id, sha256, body, receipts, created_at)"
                " VALUES (?, ?, ?, ?, ?)"
            ),
            (run_id, proof.sha256, proof.body, proof.receipts, proof.created_at),
        )
        return proof

    async def get_proof(self, run_id: str) -> ProofRecord | None:
        return await self._read("read proof", lambda conn: self._proof(conn, run_id))
