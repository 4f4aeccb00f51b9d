"""What ``SQLiteStore.prune`` deletes, one batch per transaction (docs/storage.md, Retention).

Each step is a function of the connection, run inside ``BEGIN IMMEDIATE``, that deletes at
most one batch and says whether more may be left; the store commits each batch apart, so a
prune never holds the writer lock longer than one batch. Nothing of a run that is not finished
(``status = 'running'``, whatever its lease says, or waiting for an approval) is deleted, and
a run's rows are deleted with its own principal only.

History ids come from the rowid (schema 9): the newest entry is never deleted, so the next id
stays above every id given before (a run's ``first_history_id`` relies on it), and a run that
holds it waits for the next prune.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from soulacy.kernel.store import Pruned, RetentionLimits

# A run whose rows may go: finished (a status of its end and a finish time), no approval
# pending. ``r`` is the run.
FINISHED = (
    "r.status <> 'running' AND r.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1"
    " FROM tool_approvals AS a WHERE a.run_id = r.run_id AND a.approved IS NULL)"
)
# The run of a row (``x.run_id``) is finished, or has no record.
_RUN_FINISHED_OR_NONE = (
    "NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = {x}.run_id AND NOT ({finished}))"
)
# Rows of one deleted run, each table with the run's own principal where it has one.
_RUN_ROWS = (
    ("tool_records", "run_id = ?", False),
    ("proofs", "run_id = ?", False),
    ("superseded_proofs", "run_id = ?", False),
    ("attempt_endings", "run_id = ?", False),
    ("workflow_checkpoints", "run_id = ?", False),
    ("tool_approvals", "run_id = ? AND principal IS ?", True),
    ("run_events", "run_id = ? AND principal IS ?", True),
)

Step = Callable[[sqlite3.Connection], tuple[dict[str, int], bool]]


def _finished_or_none(alias: str) -> str:
    return _RUN_FINISHED_OR_NONE.format(x=alias, finished=FINISHED)


def steps(limits: RetentionLimits, now: float) -> Iterator[Step]:
    """The batches of one prune, in order: runs first (they take their history with them),
    then history, events, proofs and leases on their own limits."""
    batch = max(1, limits.batch)
    if limits.runs is not None:
        yield _runs_step(now - limits.runs, max(1, batch // 50))
    if limits.history is not None:
        yield _history_step(now - limits.history, batch, "conversation_history", "id")
        yield _history_step(now - limits.history, batch, "tool_records", "seq")
    if limits.run_events is not None:
        yield _events_step(now - limits.run_events, batch)
    if limits.proofs is not None:
        yield _proofs_step(now - limits.proofs, batch)
    if limits.leases is not None:
        yield _leases_step(now - limits.leases, now, batch)


def add(total: Pruned, counts: dict[str, int]) -> Pruned:
    """``total`` with ``counts`` (by field name) added."""
    return attrs.evolve(total, **{k: getattr(total, k) + v for k, v in counts.items()})


def _runs_step(cutoff: float, batch: int) -> Step:
    def step(conn: sqlite3.Connection) -> tuple[dict[str, int], bool]:
        runs = conn.execute(
            "SELECT r.run_id, r.principal, r.session_id, r.agent_id, r.user_id,"
            " COALESCE(r.first_history_id, -1) FROM runs AS r"
            f" WHERE r.finished_at < ? AND {FINISHED} AND NOT EXISTS (SELECT 1"
            " FROM conversation_history AS h WHERE h.run_id = r.run_id"
            " AND h.id = (SELECT max(id) FROM conversation_history))"
            " ORDER BY r.finished_at LIMIT ?",
            (cutoff, batch),
        ).fetchall()
        counts = {"runs": 0, "history": 0, "state": 0, "proofs": 0, "run_events": 0}
        for run_id, principal, session_id, agent_id, user_id, first in runs:
            # Found through history_by_owner (the history has no index by run).
            counts["history"] += conn.execute(
                "DELETE FROM conversation_history WHERE session_id = ? AND agent_id = ?"
                " AND principal IS ? AND user_id IS ? AND id > ? AND run_id = ?",
                (session_id, agent_id, principal, user_id, first, run_id),
            ).rowcount
            for table, where, by_principal in _RUN_ROWS:
                args: tuple[Any, ...] = (run_id, principal) if by_principal else (run_id,)
                deleted = conn.execute(f"DELETE FROM {table} WHERE {where}", args).rowcount
                if table in ("proofs", "run_events"):
                    counts[table] += deleted
            counts["state"] += conn.execute(
                "DELETE FROM plugin_state WHERE run_id = ?", (run_id,)
            ).rowcount
            counts["runs"] += conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount
        return counts, len(runs) == batch

    return step


def _history_step(cutoff: float, batch: int, table: str, key: str) -> Step:
    """Entries (or tool records kept apart) older than ``cutoff``, of finished runs."""
    after = -1  # the last id examined: each batch looks at the next ``batch`` ids only
    upper: int | None = None

    def step(conn: sqlite3.Connection) -> tuple[dict[str, int], bool]:
        nonlocal after, upper
        if upper is None:
            upper = _first_id_at(conn, cutoff, table, key)
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT {key} FROM {table} WHERE {key} > ? AND {key} < ? ORDER BY {key} LIMIT ?",
                (after, upper, batch),
            )
        ]
        if not ids:
            return {}, False
        after = ids[-1]
        deleted = conn.execute(
            f"DELETE FROM {table} AS h WHERE h.{key} BETWEEN ? AND ? AND h.created_at < ?"
            f" AND h.{key} < (SELECT max({key}) FROM {table})"  # the newest stays: see above
            f" AND (h.run_id IS NULL OR {_finished_or_none('h')})",
            (ids[0], ids[-1], cutoff),
        ).rowcount
        return {"history": deleted}, len(ids) == batch

    return step


def _first_id_at(conn: sqlite3.Connection, cutoff: float, table: str, key: str) -> int:
    """A ``key`` from which every row of ``table`` is newer than ``cutoff``, by bisection
    (keys grow with time): no scan of a table that has no index by age."""
    row = conn.execute(f"SELECT min({key}), max({key}) FROM {table}").fetchone()
    if row is None or row[0] is None:
        return 0
    low, high = int(row[0]), int(row[1]) + 1  # the answer lies in [low, high]
    while low < high:
        middle = (low + high) // 2
        found = conn.execute(
            f"SELECT {key}, created_at FROM {table} WHERE {key} >= ? ORDER BY {key} LIMIT 1",
            (middle,),
        ).fetchone()
        older = isinstance(found[1], int | float) and found[1] < cutoff
        if older:
            low = int(found[0]) + 1
        else:
            high = middle
    return low + 1  # a margin of one: times are taken before the commit that orders ids


def _events_step(cutoff: float, batch: int) -> Step:
    def step(conn: sqlite3.Connection) -> tuple[dict[str, int], bool]:
        deleted = conn.execute(
            "DELETE FROM run_events WHERE (run_id, id) IN (SELECT e.run_id, e.id"
            " FROM run_events AS e JOIN runs AS r ON r.run_id = e.run_id"
            f" AND r.principal IS e.principal WHERE e.created_at < ? AND {FINISHED} LIMIT ?)",
            (cutoff, batch),
        ).rowcount
        return {"run_events": deleted}, deleted == batch

    return step


def _proofs_step(cutoff: float, batch: int) -> Step:
    def step(conn: sqlite3.Connection) -> tuple[dict[str, int], bool]:
        proofs = conn.execute(
            "DELETE FROM proofs WHERE run_id IN (SELECT p.run_id FROM proofs AS p"
            f" WHERE p.created_at < ? AND {_finished_or_none('p')} LIMIT ?)",
            (cutoff, batch),
        ).rowcount
        earlier = conn.execute(
            "DELETE FROM superseded_proofs WHERE rowid IN (SELECT s.rowid"
            f" FROM superseded_proofs AS s WHERE s.superseded_at < ? AND {_finished_or_none('s')}"
            " LIMIT ?)",
            (cutoff, batch),
        ).rowcount
        return {"proofs": proofs + earlier}, batch in (proofs, earlier)

    return step


def _leases_step(expired_before: float, now: float, batch: int) -> Step:
    def step(conn: sqlite3.Connection) -> tuple[dict[str, int], bool]:
        conn.execute("DELETE FROM lease_waiters WHERE expires_at < ?", (expired_before,))
        # Released, or expired long ago, and nobody queued: the row's only use left is its
        # token, which the high-water mark keeps.
        rows = conn.execute(
            "SELECT key, token FROM leases AS l WHERE (l.owner_id IS NULL OR l.expires_at < ?)"
            " AND NOT EXISTS (SELECT 1 FROM lease_waiters AS w WHERE w.key = l.key"
            " AND w.expires_at > ?) LIMIT ?",
            (expired_before, now, batch),
        ).fetchall()
        if not rows:
            return {}, False
        raise_high_water(conn, max(int(r[1]) for r in rows))
        conn.executemany("DELETE FROM leases WHERE key = ?", [(r[0],) for r in rows])
        return {"leases": len(rows)}, len(rows) == batch

    return step


def raise_high_water(conn: sqlite3.Connection, token: int) -> None:
    conn.execute(
        "INSERT INTO lease_high_water (id, token) VALUES (1, ?) ON CONFLICT (id)"
        " DO UPDATE SET token = max(token, excluded.token)",
        (token,),
    )


def high_water(conn: sqlite3.Connection) -> int:
    """The greatest token of a pruned lease (0: none pruned)."""
    row = conn.execute("SELECT token FROM lease_high_water WHERE id = 1").fetchone()
    return int(row[0]) if row else 0
