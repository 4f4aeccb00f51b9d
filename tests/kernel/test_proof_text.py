"""make_proof writes each receipt's JSON text directly: the text must be, byte for byte, what
the dict-then-canonical-JSON formulation writes (stored proofs are verified by their sha256)."""

from __future__ import annotations

import hashlib
import json
import math
import time
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from soulacy.kernel.store import ToolRecord
from soulacy.plugins.proofkit._proofs import RECEIPT_FIELD_CHARS, _receipt_json, make_proof

# -- the reference: the formulation before receipts were written directly, copied verbatim,
# -- with json.dumps for canonical_json (the contract it was built to keep)


def canonical_json(value: Any) -> str:
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


def reference_body(
    run_id: str,
    metadata: Mapping[str, Any],
    records: Sequence[ToolRecord],
    assertions: Sequence[Mapping[str, Any]] = (),
) -> tuple[str, str]:
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
    return body, hashlib.sha256(body.encode()).hexdigest()


def outcome(make: Callable[[], Any]) -> tuple[str, Any]:
    """What a call gives: its value, or the type of what it raised (both ways must agree)."""
    try:
        return "value", make()
    except Exception as exc:
        return "raised", type(exc)


# -- the values

# Every code point (lone surrogates too: the encoder keeps them, sha256 of the body then fails),
# with the characters the encoder escapes made likely.
char = st.one_of(
    st.characters(codec=None, exclude_categories=()),
    st.sampled_from('"\\/\x00\x1f\x7f\u2028\u2029\ud800\udfff\ufeffé€😀\n\r\t\b\f'),
)
text = st.text(char, max_size=20)
# Around the receipt bound (cut or not), with any characters either side of the cut.
long_text = st.builds(
    lambda head, n, tail: head + "é" * n + tail,
    text,
    st.integers(RECEIPT_FIELD_CHARS - 40, RECEIPT_FIELD_CHARS + 10),
    text,
)


class Str(str):
    def __str__(self) -> str:
        return "not the text"


class Number(float):
    """A float that shows itself as numpy 2's float64 does: encoded as its float value."""

    def __repr__(self) -> str:
        return f"Number({float(self)!r})"


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
keys = st.one_of(text, st.integers(), st.floats(allow_nan=False), st.booleans(), st.none())
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(text, inner, max_size=4),
        st.dictionaries(text, inner, max_size=4),
        st.dictionaries(st.integers(), inner, max_size=3),
        st.dictionaries(keys, inner, max_size=2),  # mixed key types cannot be sorted: raises
    ),
    max_leaves=12,
)
unusual = st.one_of(
    st.builds(Str, text),
    st.builds(Number, st.floats()),
    st.binary(max_size=8),
    st.just(object),  # encoded by default=str
    st.sets(st.integers(), max_size=3),
    st.builds(types.MappingProxyType, st.dictionaries(text, scalars, max_size=2)),
)
arguments = st.one_of(
    st.dictionaries(text, json_values, max_size=5),
    st.dictionaries(text, long_text, min_size=1, max_size=2),  # cut when encoded
    json_values,
    unusual,
)
odd_strs = st.one_of(unusual, scalars)
odd_timestamps = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(),
    st.builds(Number, st.floats()),
    st.none(),
)
odd_is_error = st.sampled_from([0, 1, None, "true"])


finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(1.6e9, 2.0e9),  # time.time()
    st.sampled_from([0.0, -0.0, -1.5, 1e16, 1e300, 5e-324, 1e-7, time.time()]),
)
# Every field of its plain type: the records written directly.
plain_records = st.builds(
    ToolRecord,
    st.just("r"),
    st.one_of(text, long_text),
    text,
    arguments,
    st.one_of(text, text, long_text),
    st.booleans(),
    finite_floats,
)


@st.composite
def odd_records(draw: st.DrawFn) -> ToolRecord:
    """A plain record with a field or two of another type: most take the dict path."""
    odd = {
        "call_id": odd_strs,
        "name": odd_strs,
        "content": odd_strs,
        "is_error": odd_is_error,
        "created_at": odd_timestamps,
    }
    fields = draw(st.sets(st.sampled_from(sorted(odd)), min_size=1, max_size=2))
    return attrs.evolve(draw(plain_records), **{f: draw(odd[f]) for f in sorted(fields)})


# three in four plain (st.one_of would merge a repeated strategy)
tool_records = st.integers(0, 3).flatmap(lambda k: plain_records if k else odd_records())

metadata = st.dictionaries(
    st.sampled_from(
        ["agent_id", "session_id", "status", "verification", "incomplete_reason", "turns"]
    ),
    json_values,
)
assertions = st.lists(st.dictionaries(text, json_values, max_size=3), max_size=3)

plain = ToolRecord("r", "call-1", "step", {"i": 1}, "ok-1", False, 1778000000.123456)


@settings(max_examples=400, deadline=None)
@given(tool_records)
@example(plain)
@example(ToolRecord("r", "c", "t", {"x": "y" * 5000}, "é" * 4100, True, 1700000001.5))
@example(ToolRecord("r", "c", "t", {}, "x" * RECEIPT_FIELD_CHARS, True, 0.0))
@example(ToolRecord("r", "c", "t", {}, "x" * (RECEIPT_FIELD_CHARS + 1), True, -0.0))
@example(ToolRecord("r", "c", "t", {"x": "y" * (RECEIPT_FIELD_CHARS - 8)}, "", False, 2.5))
@example(ToolRecord("r", "c", "t", {"x": "y" * (RECEIPT_FIELD_CHARS - 7)}, "", False, 2.5))
@example(ToolRecord("r", 'c"\\', "t\u2028", {2: "a", 1: "b"}, "\x00\ud800", False, 1e16))  # type: ignore[dict-item]
@example(ToolRecord("r", "c", "t", {}, "", 1, 1.0))  # type: ignore[arg-type]  # the encoder writes 1
@example(ToolRecord("r", "c", "t", {}, "", False, 1))  # an int timestamp
@example(ToolRecord("r", "c", "t", {}, "", False, math.inf))
@example(ToolRecord("r", "c", "t", {}, "", False, Number(1.5)))
@example(ToolRecord("r", "c", Str("t"), {}, "", False, 1.5))
def test_a_receipt_text_is_the_canonical_json_of_the_receipt(record: ToolRecord) -> None:
    written = outcome(lambda: _receipt_json(record))
    assert written == outcome(lambda: canonical_json(receipt(record)))


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(text, odd_strs),
    metadata,
    st.lists(tool_records, max_size=6),
    assertions,
)
@example("r-1", {}, [], [])
@example("r-1", {"agent_id": "a", "status": "completed"}, [plain, plain], [{"ok": True}])
def test_a_proof_body_is_the_canonical_json_of_the_receipts_dict(
    run_id: str,
    metadata: dict[str, Any],
    records: list[ToolRecord],
    assertions: list[dict[str, Any]],
) -> None:
    made = outcome(lambda: make_proof(run_id, metadata, records, assertions))
    expected = outcome(lambda: reference_body(run_id, metadata, records, assertions))
    if made[0] == "value":
        proof = made[1]
        assert ("value", (proof.body, proof.sha256)) == expected
        assert proof.receipts == len(records)
    else:
        assert made == expected


def test_a_proof_of_plain_records_is_the_reference_proof() -> None:
    """The bench's shape, a cut record among them: plain fields all take the written path."""
    records = [
        ToolRecord("r", f"call-{i}", "step", {"i": i}, f"ok-{i}", False, time.time())
        for i in range(200)
    ]
    records.insert(7, ToolRecord("r", "c", "t", {"x": "y" * 5000}, "é" * 4100, True, 1.5))
    metadata = {
        "agent_id": "a",
        "session_id": "s",
        "status": "completed",
        "verification": "verified",
        "incomplete_reason": None,
    }
    proof = make_proof("r", metadata, records)
    assert (proof.body, proof.sha256) == reference_body("r", metadata, records)
