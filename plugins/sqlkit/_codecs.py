"""Rows as the kernel's records, decoded by column name (``soulacy.kernel.store``).

A :class:`Codec` names a query's columns once: its ``SELECT`` list is made from the names, and a
row is decoded by them, so no statement and no decoder counts positions. Converters read what
either database gives back (SQLite's loose types, the original system's text dates).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import attrs

from soulacy.kernel.store import (
    ApprovalDecision,
    ApprovalRequest,
    CancelRequest,
    HistoryEntry,
    Lease,
    LeaseOwner,
    ProofRecord,
    RunEvent,
    RunRecord,
    ToolRecord,
)

T = TypeVar("T")
Convert = Callable[[Any], Any] | None  # None: the value as the database gives it


def loads(text: str | None) -> Any:
    """A JSON document kept as text; None for none (or an empty text)."""
    return json.loads(text) if text else None


def dumps(value: Mapping[str, Any]) -> str:
    """A mapping as kept: JSON with sorted keys, anything else as its ``str``."""
    return json.dumps(dict(value), sort_keys=True, default=str)


def epoch(value: Any) -> float:
    """Epoch seconds: a number, or the original system's 'YYYY-MM-DD HH:MM:SS' (UTC); 0 when
    unreadable."""
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.timestamp()
    return 0.0


def _or_empty(value: str | None) -> str:
    return value or ""


def _maybe_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _float_or_zero(value: Any) -> float:
    return float(value or 0.0)


def _int_or_zero(value: Any) -> int:
    return int(value or 0)


class Codec(Generic[T]):
    """The columns of a record, by name, with how each is read.

    ``make`` is called with the columns as keyword arguments, plus what :meth:`decode` is given;
    when the names are the record class's first fields, in order, it is called positionally
    (the same mapping, checked once here: the cheaper call for long reads)."""

    def __init__(self, make: Callable[..., T], columns: Mapping[str, Convert]) -> None:
        self.make = make
        self.names = tuple(columns)
        self._converts = tuple(columns.values())
        self._index = {name: n for n, name in enumerate(self.names)}
        fields = attrs.fields(make) if attrs.has(make) else ()  # type: ignore[arg-type]
        self._positional = tuple(f.name for f in fields[: len(self.names)]) == self.names

    def select(self, alias: str = "", **expressions: str) -> str:
        """The SELECT list: each column of ``alias`` (a table's name or alias), or the
        expression given for it (``metadata="COALESCE(…)"``)."""
        prefix = f"{alias}." if alias else ""
        return ", ".join(
            f"{expressions[n]} AS {n}" if n in expressions else f"{prefix}{n}" for n in self.names
        )

    def named(self, row: Sequence[Any]) -> dict[str, Any]:
        """The row's values as stored, by column name."""
        return dict(zip(self.names, row, strict=False))

    def value(self, row: Sequence[Any], name: str) -> Any:
        """One column's value as stored."""
        return row[self._index[name]]

    def decode(self, row: Sequence[Any], **given: Any) -> T:
        """The record of a row (its first ``len(names)`` values); ``given`` adds fields the
        row has not, or replaces a column's value before it is read."""
        if given:
            values = dict(zip(self.names, row, strict=False))
            for name in given.keys() & self._index.keys():
                values[name] = given.pop(name)
            converted = {
                n: v if f is None else f(v)
                for (n, v), f in zip(values.items(), self._converts, strict=True)
            }
            return self.make(**converted, **given)
        args = [v if f is None else f(v) for f, v in zip(self._converts, row, strict=False)]
        if self._positional:
            return self.make(*args)
        return self.make(**dict(zip(self.names, args, strict=True)))


RUN = Codec(
    RunRecord,
    {
        "run_id": None,
        "agent_id": None,
        "session_id": None,
        "user_id": None,
        "principal": None,
        "status": None,
        "verification": None,
        "incomplete_reason": None,
        "metadata": loads,
        "started_at": float,
        "finished_at": _maybe_float,
        "attempt": int,
        "lease_key": None,
    },
)
HISTORY = Codec(
    HistoryEntry,
    {
        "id": int,
        "agent_id": _or_empty,
        "session_id": _or_empty,
        "run_id": None,
        "role": _or_empty,
        "content": _or_empty,
        "tokens": None,
        "created_at": epoch,
        "metadata": loads,
        "tool_call_id": None,
        "tool_calls": lambda text: loads(text) or (),
        "name": None,
        "is_error": bool,
        "principal": None,
        "user_id": None,
        "attempt": int,
    },
)
TOOL_RECORD = Codec(  # the run id is given: a run's records are read by run
    ToolRecord,
    {
        "call_id": None,
        "name": None,
        "arguments": json.loads,
        "content": None,
        "is_error": bool,
        "created_at": float,
    },
)
PROOF = Codec(  # the run id is given
    ProofRecord,
    {"sha256": None, "body": None, "receipts": int, "created_at": float},
)
CANCEL = Codec(CancelRequest, {"id": int, "reason": None, "run_id": None, "lease_key": None})
RUN_EVENT = Codec(  # select ``json`` as the stored ``data``: a stream writes it as it is
    RunEvent, {"id": int, "name": None, "data": json.loads, "json": None}
)


def _lease(
    key: str,
    now: float,
    token: Any,
    owner_id: str | None,
    pid: Any,
    host: str | None,
    boot: str | None,
    holder: str | None,
    acquired_at: Any,
    renewed_at: Any,
    expires_at: float,
) -> Lease | None:
    if owner_id is None:  # free: released, or never granted
        return None
    owner = LeaseOwner(owner_id, pid, host or "", boot or "")
    return Lease(
        key, owner, int(token), holder or "", acquired_at, renewed_at, expires_at, expires_at <= now
    )


LEASE = Codec(  # the key and the time it is judged at are given (``key=…, now=…``)
    _lease,
    {
        "token": None,
        "owner_id": None,
        "pid": _int_or_zero,
        "host": None,
        "boot": None,
        "holder": None,
        "acquired_at": _float_or_zero,
        "renewed_at": _float_or_zero,
        "expires_at": _float_or_zero,
    },
)


def _approval(
    approved: Any,
    approver: str | None,
    decided_by: str | None,
    note: str | None,
    decided_at: Any,
    result: str | None,
    **request: Any,
) -> ApprovalRequest:
    decision = None
    if approved is not None:
        decision = ApprovalDecision(
            bool(approved), approver or "", decided_by, note, decided_at, result
        )
    return ApprovalRequest(**request, decision=decision)


APPROVAL = Codec(
    _approval,
    {
        "run_id": None,
        "call_id": None,
        "tool": None,
        "arguments": json.loads,
        "agent_id": None,
        "session_id": None,
        "principal": None,
        "user_id": None,
        "request": json.loads,
        "reasons": lambda text: tuple(json.loads(text)),
        "requested_at": float,
        "approved": None,
        "approver": None,
        "decided_by": None,
        "note": None,
        "decided_at": _float_or_zero,
        "result": None,
    },
)
