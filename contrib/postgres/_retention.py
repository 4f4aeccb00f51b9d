"""What ``PostgresStore.prune`` deletes, one batch per transaction (docs/storage.md, Retention).

The same rules as the SQLite store's (``soulacy.plugins.sqlite_store._retention``): nothing of
a run that is not finished, a run's rows with its own principal only, each batch its own
transaction. Rows a batch deletes are locked first (``FOR UPDATE SKIP LOCKED``), so a run
being started again, or a lease being granted, is left to the next prune instead of waited
for. Identity columns never give an id twice, so no row is kept for its id (as SQLite's
newest history row is).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import attrs

from soulacy.kernel.store import Pruned, RetentionLimits

from ._schema import Connection

FINISHED = (
    "r.status <> 'running' AND r.finished_at IS NOT NULL AND NOT EXISTS (SELECT 1"
    " FROM tool_approvals AS a WHERE a.run_id = r.run_id AND a.approved IS NULL)"
)
_RUN_FINISHED_OR_NONE = (
    "NOT EXISTS (SELECT 1 FROM runs AS r WHERE r.run_id = {x}.run_id AND NOT ({finished}))"
)
_SAME = "IS NOT DISTINCT FROM"
_RUN_ROWS = (
    ("tool_records", "run_id = %s", False),
    ("proofs", "run_id = %s", False),
    ("superseded_proofs", "run_id = %s", False),
    ("attempt_endings", "run_id = %s", False),
    ("workflow_checkpoints", "run_id = %s", False),
    ("tool_approvals", f"run_id = %s AND principal {_SAME} %s", True),
    ("run_events", f"run_id = %s AND principal {_SAME} %s", True),
)

Step = Callable[[Connection], tuple[dict[str, int], bool]]


def _finished_or_none(alias: str) -> str:
    return _RUN_FINISHED_OR_NONE.format(x=alias, finished=FINISHED)


def steps(limits: RetentionLimits, now: float) -> Iterator[Step]:
    """The batches of one prune, in order (as the SQLite store's)."""
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
    return attrs.evolve(total, **{k: getattr(total, k) + v for k, v in counts.items()})


def _runs_step(cutoff: float, batch: int) -> Step:
    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        runs = conn.execute(
            "SELECT r.run_id, r.principal, r.session_id, r.agent_id, r.user_id FROM runs AS r"
            f" WHERE r.finished_at < %s AND {FINISHED} ORDER BY r.finished_at LIMIT %s"
            " FOR UPDATE OF r SKIP LOCKED",
            (cutoff, batch),
        ).fetchall()
        counts = {"runs": 0, "history": 0, "state": 0, "proofs": 0, "run_events": 0}
        for run_id, principal, session_id, agent_id, user_id in runs:
            counts["history"] += conn.execute(
                "DELETE FROM conversation_history WHERE session_id = %s AND agent_id = %s"
                f" AND principal {_SAME} %s AND user_id {_SAME} %s AND run_id = %s",
                (session_id, agent_id, principal, user_id, run_id),
            ).rowcount
            for table, where, by_principal in _RUN_ROWS:
                args: tuple[Any, ...] = (run_id, principal) if by_principal else (run_id,)
                deleted = conn.execute(f"DELETE FROM {table} WHERE {where}", args).rowcount
                if table in ("proofs", "run_events"):
                    counts[table] += deleted
            counts["state"] += conn.execute(
                "DELETE FROM plugin_state WHERE run_id = %s", (run_id,)
            ).rowcount
            counts["runs"] += conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id,)).rowcount
        return counts, len(runs) == batch

    return step


def _history_step(cutoff: float, batch: int, table: str, key: str) -> Step:
    """Entries (or tool records kept apart) older than ``cutoff``, of finished runs."""
    after = -1
    upper: int | None = None

    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        nonlocal after, upper
        if upper is None:
            upper = _first_id_at(conn, cutoff, table, key)
        ids = [
            int(r[0])
            for r in conn.execute(
                f"SELECT {key} FROM {table} WHERE {key} > %s AND {key} < %s"
                f" ORDER BY {key} LIMIT %s",
                (after, upper, batch),
            )
        ]
        if not ids:
            return {}, False
        after = ids[-1]
        deleted = conn.execute(
            f"DELETE FROM {table} AS h WHERE h.{key} BETWEEN %s AND %s"
            f" AND h.created_at < %s AND (h.run_id IS NULL OR {_finished_or_none('h')})",
            (ids[0], ids[-1], cutoff),
        ).rowcount
        return {"history": deleted}, len(ids) == batch

    return step


def _first_id_at(conn: Connection, cutoff: float, table: str, key: str) -> int:
    """A ``key`` from which every row of ``table`` is newer than ``cutoff``, by bisection
    (keys grow with time; no index by age)."""
    row = conn.execute(f"SELECT min({key}), max({key}) FROM {table}").fetchone()
    if row is None or row[0] is None:
        return 0
    low, high = int(row[0]), int(row[1]) + 1
    while low < high:
        middle = (low + high) // 2
        found = conn.execute(
            f"SELECT {key}, created_at FROM {table} WHERE {key} >= %s ORDER BY {key} LIMIT 1",
            (middle,),
        ).fetchone()
        assert found is not None  # max(id) >= middle
        if float(found[1]) < cutoff:
            low = int(found[0]) + 1
        else:
            high = middle
    return low + 1  # a margin of one: times are taken before the commit that orders ids


def _events_step(cutoff: float, batch: int) -> Step:
    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        deleted = conn.execute(
            "DELETE FROM run_events WHERE (run_id, id) IN (SELECT e.run_id, e.id"
            " FROM run_events AS e JOIN runs AS r ON r.run_id = e.run_id"
            f" AND r.principal {_SAME} e.principal WHERE e.created_at < %s AND {FINISHED}"
            " LIMIT %s)",
            (cutoff, batch),
        ).rowcount
        return {"run_events": deleted}, deleted == batch

    return step


def _proofs_step(cutoff: float, batch: int) -> Step:
    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        proofs = conn.execute(
            "DELETE FROM proofs WHERE run_id IN (SELECT p.run_id FROM proofs AS p"
            f" WHERE p.created_at < %s AND {_finished_or_none('p')} LIMIT %s)",
            (cutoff, batch),
        ).rowcount
        earlier = conn.execute(
            "DELETE FROM superseded_proofs WHERE ctid IN (SELECT s.ctid"
            f" FROM superseded_proofs AS s WHERE s.superseded_at < %s"
            f" AND {_finished_or_none('s')} LIMIT %s)",
            (cutoff, batch),
        ).rowcount
        return {"proofs": proofs + earlier}, batch in (proofs, earlier)

    return step


def _leases_step(expired_before: float, now: float, batch: int) -> Step:
    def step(conn: Connection) -> tuple[dict[str, int], bool]:
        conn.execute("DELETE FROM lease_waiters WHERE expires_at < %s", (expired_before,))
        # Locked before the high-water mark is raised: no grant comes between the two.
        rows = conn.execute(
            "SELECT key, token FROM leases AS l WHERE (l.owner_id IS NULL OR l.expires_at < %s)"
            " AND NOT EXISTS (SELECT 1 FROM lease_waiters AS w WHERE w.key = l.key"
            " AND w.expires_at > %s) LIMIT %s FOR UPDATE SKIP LOCKED",
            (expired_before, now, batch),
        ).fetchall()
        if not rows:
            return {}, False
        conn.execute(
            "INSERT INTO lease_high_water (id, token) VALUES (TRUE, %s) ON CONFLICT (id)"
            " DO UPDATE SET token = GREATEST(lease_high_water.token, excluded.token)",
            (max(int(r[1]) for r in rows),),
        )
        conn.execute("DELETE FROM leases WHERE key = ANY(%s)", ([r[0] for r in rows],))
        return {"leases": len(rows)}, len(rows) == batch

    return step
