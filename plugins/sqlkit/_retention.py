"""What a store's ``prune`` deletes, one batch per transaction (docs/storage.md, Retention).

Each step is a function of the connection, run inside a write transaction, that deletes at most
one batch and says whether more may be left; the store commits each batch apart, so a prune
never holds its locks longer than one batch. Nothing of a run that is not finished
(``status = 'running'``, whatever its lease says, or waiting for an approval) is deleted, and a
run's rows are deleted with its own principal only.

PostgreSQL locks the rows a batch deletes first (``FOR UPDATE SKIP LOCKED``): a run being
started again, or a lease being granted, is left to the next prune instead of waited for.
SQLite's history ids come from the rowid (its schema 9): there the newest entry is never
deleted (``keeps_newest``), so the next id stays above every id given before (a run's
``first_history_id`` relies on it), and a run that holds it waits for the next prune.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from soulacy.kernel.store import Pruned, RetentionLimits

from ._dialect import Connection, Dialect, executemany

# A run whose rows may go: finished (a status of its end and a finish time), no approval
# pending. ``r`` is the run.
FINISHED = (
    "r.status <> 'running' AND r.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1"
    " FROM tool_approvals AS a WHERE a.run_id = r.run_id AND a.approved IS NULL)"
)
# Tables holding rows of one run, deleted with it; True: with the run's own principal only.
_RUN_ROWS = (
    ("tool_records", False),
    ("proofs", False),
    ("superseded_proofs", False),
    ("attempt_endings", False),
    ("workflow_checkpoints", False),
    ("tool_approvals", True),
    ("run_events", True),
)

Step = Callable[[Connection], tuple[dict[str, int], bool]]


@attrs.frozen
class Schema:
    """What a prune needs to know of the store's tables beyond its dialect."""

    dialect: Dialect
    keeps_newest: bool  # history ids from a rowid: the newest row is never deleted
    first_history_id: str  # SQL, of run ``r``: every history id of the run is greater


def _finished_or_none(alias: str) -> str:
    """The run of a row (``alias.run_id``) is finished, or has no record."""
    return (
        f"NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = {alias}.run_id AND NOT ({FINISHED}))"
    )


def steps(schema: Schema, limits: RetentionLimits, now: float) -> Iterator[Step]:
    """The batches of one prune, in order: runs first (they take their history with them),
    then history, events, proofs and leases on their own limits."""
    batch = max(1, limits.batch)
    if limits.runs is not None:
        yield _runs_step(schema, now - limits.runs, max(1, batch // 50))
    if limits.history is not None:
        yield _history_step(schema, now - limits.history, batch, "conversation_history", "id")
        yield _history_step(schema, now - limits.history, batch, "tool_records", "seq")
    if limits.run_events is not None:
        yield _events_step(schema.dialect, now - limits.run_events, batch)
    if limits.proofs is not None:
        yield _proofs_step(schema.dialect, now - limits.proofs, batch)
    if limits.leases is not None:
        yield _leases_step(schema.dialect, now - limits.leases, now, batch)


def add(total: Pruned, counts: dict[str, int]) -> Pruned:
    """``total`` with ``counts`` (by field name) added."""
    return attrs.evolve(total, **{k: getattr(total, k) + v for k, v in counts.items()})


def _runs_step(schema: Schema, cutoff: float, batch: int) -> Step:
    d = schema.dialect
    holds_newest = (
        " AND NOT EXISTS (SELECT 1 FROM conversation_history AS h WHERE h.run_id = r.run_id"
        " AND h.id = (SELECT max(id) FROM conversation_history))"
        if schema.keeps_newest
        else ""
    )
    select = d.sql(
        "SELECT r.run_id, r.principal, r.session_id, r.agent_id, r.user_id,"
        f" {schema.first_history_id} FROM runs AS r WHERE r.finished_at < ? AND {FINISHED}"
        f"{holds_newest} ORDER BY r.finished_at LIMIT ?{d.skip_locked}"
    )
    # Found through history_by_owner (the history has no index by run).
    history = d.sql(
        f"DELETE FROM conversation_history WHERE session_id = ? AND agent_id = ?"
        f" AND principal {d.same} ? AND user_id {d.same} ? AND id > ? AND run_id = ?"
    )
    by_run = d.sql("run_id = ?")
    by_run_and_principal = d.sql(f"run_id = ? AND principal {d.same} ?")

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        runs = conn.execute(select, (cutoff, batch)).fetchall()
        counts = {"runs": 0, "history": 0, "state": 0, "proofs": 0, "run_events": 0}
        for run_id, principal, session_id, agent_id, user_id, first in runs:
            owner = (session_id, agent_id, principal, user_id, first, run_id)
            counts["history"] += conn.execute(history, owner).rowcount
            for table, by_principal in _RUN_ROWS:
                where, args = (
                    (by_run_and_principal, (run_id, principal))
                    if by_principal
                    else (by_run, (run_id,))
                )
                if table == "run_events":  # counted in events, not rows
                    counts[table] += _events_deleted(
                        conn, f"DELETE FROM {table} WHERE {where}", args
                    )
                    continue
                deleted = conn.execute(f"DELETE FROM {table} WHERE {where}", args).rowcount
                if table == "proofs":
                    counts[table] += deleted
            counts["state"] += conn.execute(
                d.sql("DELETE FROM plugin_state WHERE run_id = ?"), (run_id,)
            ).rowcount
            counts["runs"] += conn.execute(
                d.sql("DELETE FROM runs WHERE run_id = ?"), (run_id,)
            ).rowcount
        return counts, len(runs) == batch

    return step


def _history_step(schema: Schema, cutoff: float, batch: int, table: str, key: str) -> Step:
    """Entries (or tool records kept apart) older than ``cutoff``, of finished runs."""
    d = schema.dialect
    after = -1  # the last id examined: each batch looks at the next ``batch`` ids only
    upper: int | None = None
    newest = f" AND h.{key} < (SELECT max({key}) FROM {table})" if schema.keeps_newest else ""
    select = d.sql(
        f"SELECT {key} FROM {table} WHERE {key} > ? AND {key} < ? ORDER BY {key} LIMIT ?"
    )
    delete = d.sql(
        f"DELETE FROM {table} AS h WHERE h.{key} BETWEEN ? AND ? AND h.created_at < ?{newest}"
        f" AND (h.run_id IS NULL OR {_finished_or_none('h')})"
    )

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        nonlocal after, upper
        if upper is None:
            upper = _first_id_at(d, conn, cutoff, table, key)
        ids = [int(r[0]) for r in conn.execute(select, (after, upper, batch)).fetchall()]
        if not ids:
            return {}, False
        after = ids[-1]
        deleted = conn.execute(delete, (ids[0], ids[-1], cutoff)).rowcount
        return {"history": deleted}, len(ids) == batch

    return step


def _first_id_at(d: Dialect, conn: Connection, cutoff: float, table: str, key: str) -> int:
    """A ``key`` from which every row of ``table`` is newer than ``cutoff``, by bisection
    (keys grow with time): no scan of a table that has no index by age."""
    row = conn.execute(f"SELECT min({key}), max({key}) FROM {table}").fetchone()
    if row is None or row[0] is None:
        return 0
    low, high = int(row[0]), int(row[1]) + 1  # the answer lies in [low, high]
    first = d.sql(f"SELECT {key}, created_at FROM {table} WHERE {key} >= ? ORDER BY {key} LIMIT 1")
    while low < high:
        middle = (low + high) // 2
        found = conn.execute(first, (middle,)).fetchone()  # max(key) >= middle: a row
        older = isinstance(found[1], int | float) and found[1] < cutoff
        if older:
            low = int(found[0]) + 1
        else:
            high = middle
    return low + 1  # a margin of one: times are taken before the commit that orders ids


# What a deleted row of run events held: a row holds a batch of a run's events, from ``id`` to
# ``last_id`` (NULL: one, written before schema 14 / 8; docs/performance/0085).
EVENTS_HELD = " RETURNING COALESCE(last_id, id) - id + 1"


def _events_deleted(conn: Connection, delete: str, args: Sequence[Any]) -> int:
    """How many run events the rows ``delete`` deletes held."""
    return sum(int(r[0]) for r in conn.execute(delete + EVENTS_HELD, args).fetchall())


def _events_step(d: Dialect, cutoff: float, batch: int) -> Step:
    delete = d.sql(
        "DELETE FROM run_events WHERE (run_id, id) IN (SELECT e.run_id, e.id"
        " FROM run_events AS e JOIN runs AS r ON r.run_id = e.run_id"
        f" AND r.principal {d.same} e.principal WHERE e.created_at < ? AND {FINISHED} LIMIT ?)"
        + EVENTS_HELD
    )

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        rows = conn.execute(delete, (cutoff, batch)).fetchall()
        return {"run_events": sum(int(r[0]) for r in rows)}, len(rows) == batch

    return step


def _proofs_step(d: Dialect, cutoff: float, batch: int) -> Step:
    proofs = d.sql(
        "DELETE FROM proofs WHERE run_id IN (SELECT p.run_id FROM proofs AS p"
        f" WHERE p.created_at < ? AND {_finished_or_none('p')} LIMIT ?)"
    )
    superseded = d.sql(
        f"DELETE FROM superseded_proofs WHERE {d.row_id} IN (SELECT s.{d.row_id}"
        f" FROM superseded_proofs AS s WHERE s.superseded_at < ? AND {_finished_or_none('s')}"
        " LIMIT ?)"
    )

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        deleted = conn.execute(proofs, (cutoff, batch)).rowcount
        earlier = conn.execute(superseded, (cutoff, batch)).rowcount
        return {"proofs": deleted + earlier}, batch in (deleted, earlier)

    return step


def _leases_step(d: Dialect, expired_before: float, now: float, batch: int) -> Step:
    # Released, or expired long ago, and nobody queued: the row's only use left is its token,
    # which the high-water mark keeps. Locked before the mark is raised: no grant comes between.
    select = d.sql(
        "SELECT key, token FROM leases AS l WHERE (l.owner_id IS NULL OR l.expires_at < ?)"
        " AND NOT EXISTS (SELECT 1 FROM lease_waiters AS w WHERE w.key = l.key"
        f" AND w.expires_at > ?) LIMIT ?{d.skip_locked}"
    )

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        conn.execute(d.sql("DELETE FROM lease_waiters WHERE expires_at < ?"), (expired_before,))
        rows = conn.execute(select, (expired_before, now, batch)).fetchall()
        if not rows:
            return {}, False
        raise_high_water(d, conn, max(int(r[1]) for r in rows))
        executemany(conn, d.sql("DELETE FROM leases WHERE key = ?"), [(r[0],) for r in rows])
        return {"leases": len(rows)}, len(rows) == batch

    return step


def raise_high_water(d: Dialect, conn: Connection, token: int) -> None:
    """The high-water mark of pruned lease tokens (one row) at least ``token``."""
    conn.execute(
        d.sql(
            "INSERT INTO lease_high_water (id, token) VALUES (TRUE, ?) ON CONFLICT (id)"
            f" DO UPDATE SET token = {d.greatest}(lease_high_water.token, excluded.token)"
        ),
        (token,),
    )


def high_water(conn: Connection) -> int:
    """The greatest token of a pruned lease (0: none pruned)."""
    row = conn.execute("SELECT token FROM lease_high_water").fetchone()
    return int(row[0]) if row else 0
