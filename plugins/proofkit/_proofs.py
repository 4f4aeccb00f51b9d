"""Proofs of finished runs and their receipts, built the same way by every store."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from soulacy.kernel.store import ProofRecord, ToolRecord, canonical_json

RECEIPT_FIELD_CHARS = 4000  # each text field of a receipt is bounded; the count of receipts is not


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


# What the canonical encoder writes for a str and a bool.
_json_str: Callable[[str], str] = json.encoder.encode_basestring
_JSON_BOOL = {True: "true", False: "false"}


def _receipt_json(record: ToolRecord) -> str:
    """``canonical_json(receipt(record))``, written directly when every field has its plain
    type: no dict and no sort (the keys are written in their sorted order), each str escaped as
    the encoder escapes it, the float as its repr. A record with any other field takes the dict
    path. (A receipt is written per tool call, at the end of every run.)"""
    call_id, name, content, at = record.call_id, record.name, record.content, record.created_at
    if not (
        type(call_id) is str
        and type(name) is str
        and type(content) is str
        and type(at) is float
        and math.isfinite(at)  # the encoder writes NaN and Infinity where repr writes nan, inf
        and type(record.is_error) is bool
    ):
        return canonical_json(receipt(record))
    arguments, result, cut = canonical_json(record.arguments), content, ""
    # Past bounded()'s limit a field is cut, and the receipt says so.
    if len(arguments) > RECEIPT_FIELD_CHARS or len(content) > RECEIPT_FIELD_CHARS:
        arguments, args_cut = bounded(arguments)
        result, result_cut = bounded(content)
        cut = (
            f',"truncated":{{"arguments":{_JSON_BOOL[args_cut]},'
            f'"result":{_JSON_BOOL[result_cut]},"result_chars":{len(content)}}}'
        )
    return (
        f'{{"arguments":{_json_str(arguments)},"at":{at!r},"call_id":{_json_str(call_id)},'
        f'"is_error":{_JSON_BOOL[record.is_error]},"result":{_json_str(result)},'
        f'"tool":{_json_str(name)}{cut}}}'
    )


def make_proof(
    run_id: str,
    metadata: Mapping[str, Any],
    records: Sequence[ToolRecord],
    assertions: Sequence[Mapping[str, Any]] = (),
) -> ProofRecord:
    """Build the proof of a finished run from its tool records (in call order).

    The body is ``canonical_json`` of one dict of eight keys. It is written in three parts: the
    keys sorted before ``receipts`` and those after, each encoded as a dict, with the receipts,
    each written by :func:`_receipt_json`, in between.
    """
    before = canonical_json(
        {
            "agent_id": metadata.get("agent_id"),
            "assertions": list(assertions),
            "incomplete_reason": metadata.get("incomplete_reason"),
        }
    )
    after = canonical_json(
        {
            "run_id": run_id,
            "session_id": metadata.get("session_id"),
            "status": metadata.get("status"),
            "verification": metadata.get("verification"),
        }
    )
    receipts = ",".join([_receipt_json(r) for r in records])
    body = f'{before[:-1]},"receipts":[{receipts}],{after[1:]}'
    return ProofRecord(run_id, hashlib.sha256(body.encode()).hexdigest(), body, len(records))
