"""The detector's verdicts pinned against the original implementation (a SHA-256 signature of
every result in a deque, counted with Counters), kept here as the reference: the cheaper keys,
the fast path of ``normalize_text`` and the ring window must change no verdict, warning,
evidence or statistic."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter, deque
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from soulacy.kernel.contracts import Verdict
from soulacy.plugins.progress import SignatureDetector, normalize_text, signature

# -- the reference: the detector as it was before the per-run memory work ------------------------

_VOLATILE_TEXT = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"),
        "<time>",
    ),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ns|µs|us|ms|s|sec|seconds)\b"), "<duration>"),
)


def reference_normalize(text: str) -> str:
    for pattern, replacement in _VOLATILE_TEXT:
        text = pattern.sub(replacement, text)
    return text


def _strip(value: Any, volatile: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _strip(v, volatile) for k, v in value.items() if str(k) not in volatile}
    if isinstance(value, list | tuple):
        return [_strip(v, volatile) for v in value]
    if isinstance(value, str):
        return reference_normalize(value)
    return value


def reference_signature(result: Any, is_error: bool, volatile: frozenset[str]) -> str:
    if isinstance(result, str):
        canonical = reference_normalize(result)
    else:
        canonical = json.dumps(
            _strip(result, volatile),
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
    kind = "error" if is_error else "ok"
    return hashlib.sha256(f"{kind}\0{canonical}".encode()).hexdigest()[:16]


class ReferenceDetector:
    def __init__(self, limit: int | None, window: int, volatile: frozenset[str]) -> None:
        self.limit, self.window, self.volatile = limit, window, volatile
        self._recent: deque[str] = deque(maxlen=window)
        self._counts: Counter[str] = Counter()
        self._streak = 0
        self._streak_tools: Counter[str] = Counter()
        self._warned = False
        self._last = "progress"
        self.observed = 0

    def observe(self, tool: str, result: Any, is_error: bool) -> Verdict:
        self.observed += 1
        sig = reference_signature(result, is_error, self.volatile)
        fresh = self._counts[sig] == 0
        if len(self._recent) == self._recent.maxlen:
            old = self._recent[0]
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        self._recent.append(sig)
        self._counts[sig] += 1
        if fresh:
            self._streak, self._warned = 1, False
            self._streak_tools.clear()
            self._streak_tools[tool] += 1
            return self._verdict("progress")
        self._streak += 1
        self._streak_tools[tool] += 1
        if self.limit is None:
            return self._verdict("repeated")
        if self._streak >= self.limit:
            evidence = {
                "reason": "no_progress",
                "limit": self.limit,
                "repeated_results": self._streak,
                "signature": sig,
                "tools": dict(self._streak_tools),
            }
            return self._verdict("stalled", evidence=evidence)
        if not self._warned and self._streak >= max(1, self.limit // 2):
            self._warned = True
            left = self.limit - self._streak
            return self._verdict(
                "repeated",
                warning=(
                    f"Your last {self._streak} tool results returned nothing new (the same"
                    " evidence as before). Try a different approach or give your final answer:"
                    f" the run stops as incomplete after {left} more result(s) without progress."
                ),
            )
        return self._verdict("repeated")

    def _verdict(
        self, kind: Any, warning: str | None = None, evidence: Mapping[str, Any] | None = None
    ) -> Verdict:
        self._last = kind
        return Verdict(kind, warning, evidence or {})

    def statistics(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "in_window": len(self._recent),
            "distinct_in_window": len(self._counts),
            "streak": self._streak,
            "limit": self.limit,
            "last_verdict": self._last,
            "observed": self.observed,
        }


# -- strategies: few distinct values, so that repeats, windows and streaks all happen ------------

# Pieces the volatile patterns match, almost match, or meet across a replacement.
PIECES = [
    "ok-3",
    "ok-",
    "done",
    "2026-11-30T08:00:01Z",
    "2026-11-30 09:12",
    "2026-",
    "5s",
    "35 ms",
    "12µs",
    "1.5 seconds",
    "7sec",
    "3n",
    "deadbeef-dead-beef-dead-beefdeadbeef",
    "DEADBEEF-0000-1111-2222-333344445555",
    "abcdef01-",
    " ",
    "-",
    "x" * 40,
    "é",
    "\0",
]
texts = st.lists(st.sampled_from(PIECES), max_size=4).map("".join)
structured = st.recursive(
    st.none() | st.integers(0, 3) | texts,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["state", "timestamp", "n", "path"]), inner, max_size=3)
    ),
    max_leaves=6,
)
results = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), texts | structured, st.booleans()),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, max_size=1).map(lambda t: t[0] if t else ""))
def test_normalize_text_is_unchanged(text: str) -> None:
    assert normalize_text(text) == reference_normalize(text)


@settings(max_examples=300, deadline=None)
@given(texts | structured, st.booleans())
def test_signatures_are_unchanged(result: Any, is_error: bool) -> None:
    volatile = frozenset({"timestamp"})
    assert signature(result, is_error, volatile) == reference_signature(result, is_error, volatile)


@settings(max_examples=300, deadline=None)
@given(
    results,
    st.sampled_from([None, 1, 2, 3, 5, 20]),
    st.sampled_from([2, 3, 5, 30]),
)
def test_every_verdict_is_the_reference_verdict(
    sequence: list[tuple[str, Any, bool]], limit: int | None, window: int
) -> None:
    volatile = ["timestamp", "request_id"]
    detector = SignatureDetector(limit, window, volatile)
    reference = ReferenceDetector(limit, window, frozenset(volatile))
    for n, (tool, result, is_error) in enumerate(sequence):
        got = detector.observe(tool, {"n": n}, result, is_error)
        assert got == reference.observe(tool, result, is_error), f"result {n + 1}: {result!r}"
        assert detector.statistics() == reference.statistics()


def test_a_stall_reports_the_sha256_signature_of_the_result() -> None:
    detector = SignatureDetector(limit=3, window=30)
    verdicts = [detector.observe("t", {}, "ok-3", False) for _ in range(3)]
    assert verdicts[-1].kind == "stalled"
    assert verdicts[-1].evidence["signature"] == reference_signature("ok-3", False, frozenset())


def test_text_and_structured_results_with_the_same_canonical_form_repeat() -> None:
    # As before: the signature is of the canonical text, whatever type produced it.
    detector = SignatureDetector(limit=20, window=30)
    assert detector.observe("t", {}, '["x"]', False).kind == "progress"
    assert detector.observe("t", {}, ["x"], False).kind == "repeated"


def test_runs_share_the_volatile_field_set() -> None:
    fields = ["timestamp", "request_id"]
    first, second = SignatureDetector(20, 30, fields), SignatureDetector(20, 30, list(fields))
    assert first.volatile is second.volatile
    assert first.volatile == frozenset(fields)


def test_a_detector_holds_less_than_before() -> None:
    detector = SignatureDetector(20, 30, ["timestamp"])
    reference = ReferenceDetector(20, 30, frozenset(["timestamp"]))
    for n in range(9):  # a W3 run: nine tool results
        detector.observe("step", {"i": n}, f"ok-{n}", False)
        reference.observe("step", f"ok-{n}", False)
    assert _deep_size(detector, shared={detector.volatile}) < _deep_size(reference) / 2


def _deep_size(obj: Any, shared: set[Any] | None = None) -> int:
    """Bytes of ``obj`` and what it holds, not counting ``shared`` objects or interned text."""
    seen: set[int] = {id(s) for s in shared or ()}
    todo, total = [obj], 0
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, int | type(None) | bool):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset | deque):
            todo.extend(item)
        for name in getattr(type(item), "__slots__", ()):
            if hasattr(item, name):
                todo.append(getattr(item, name))
        if hasattr(item, "__dict__"):
            todo.append(vars(item))
    return total
