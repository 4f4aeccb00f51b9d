"""Stall detection by result signatures over a bounded window."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

from soulacy.kernel import json_encoder
from soulacy.kernel.contracts import Verdict

# Text that changes on every call without meaning progress.
_VOLATILE_TEXT = (
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"),
        "<time>",
    ),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<id>"),
    (re.compile(r"\b\d+(\.\d+)?\s?(ns|µs|us|ms|s|sec|seconds)\b"), "<duration>"),
)


# One pass that finds what each pattern above needs to match at all (four digits and a dash;
# eight hex digits and a dash; a digit, an optional space and a unit's first letter): text
# without any of them, most short tool results, is left as it is without the three passes.
_MAYBE_VOLATILE = re.compile(r"\d{4}-|(?i:[0-9a-f]{8}-)|\d\s?[nµums]")

# Up to this many characters the canonical text itself is a result's key in the window,
# cheaper than a digest and no larger (a key is "\0ok\0" + text, never 16 hex digits).
_SHORT = 48


def normalize_text(text: str) -> str:
    if _MAYBE_VOLATILE.search(text) is None:
        return text
    for pattern, replacement in _VOLATILE_TEXT:
        text = pattern.sub(replacement, text)
    return text


def _strip(value: Any, volatile: frozenset[str]) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _strip(v, volatile) for k, v in value.items() if str(k) not in volatile}
    if isinstance(value, list | tuple):
        return [_strip(v, volatile) for v in value]
    if isinstance(value, str):
        return normalize_text(value)
    return value


# Made once: json.dumps with options builds an encoder on every call (every tool result).
_CANONICAL = json_encoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _canonical(result: Any, volatile: frozenset[str]) -> str:
    if isinstance(result, str):
        return normalize_text(result)
    return _CANONICAL(_strip(result, volatile))


# The verdicts of most results, made once (one per tool result otherwise; nothing reads
# their empty evidence but to copy it).
_PLAIN = {kind: Verdict(kind) for kind in ("progress", "repeated", "stalled")}


def _digest(labelled: str) -> str:
    return hashlib.sha256(labelled.encode()).hexdigest()[:16]


def signature(result: Any, is_error: bool, volatile: frozenset[str]) -> str:
    """A stable hash of what a tool returned: canonical JSON of structured results with volatile
    fields removed, text as text, and errors as errors with their message."""
    kind = "error" if is_error else "ok"
    return _digest(f"{kind}\0{_canonical(result, volatile)}")


def _window_key(result: Any, is_error: bool, volatile: frozenset[str]) -> str:
    """What the window compares: equal exactly when the signatures are (short canonical text
    is its own key; it starts with NUL, which a digest never holds)."""
    labelled = f"{'error' if is_error else 'ok'}\0{_canonical(result, volatile)}"
    return "\0" + labelled if len(labelled) <= _SHORT else _digest(labelled)


# The volatile field sets in use, shared by every run's detector (a run used to build its own).
_VOLATILE_SETS: dict[tuple[str, ...], frozenset[str]] = {}


def _shared(fields: Iterable[str]) -> frozenset[str]:
    if isinstance(fields, frozenset):
        return fields
    key = tuple(fields)
    found = _VOLATILE_SETS.get(key)
    if found is None:
        if len(_VOLATILE_SETS) >= 64:  # configurations come and go: never grow without bound
            _VOLATILE_SETS.clear()
        found = _VOLATILE_SETS[key] = frozenset(key)
    return found


class SignatureDetector:
    """One run's detector: ``limit`` consecutive results without a fresh one stall the run.

    A result is fresh when its signature is not among the last ``window`` results; the first
    result of a streak is the fresh one, so ``limit`` identical results stop the run and one
    fewer does not. Alternating tools that return evidence seen before are repeats too, since
    nothing about the arguments counts. Memory is bounded by ``window``.

    Idle replies (the tool loop's ``observe_reply``: empty, or only saying it is working on
    it) count against the same ``limit``; any tool result resets their count.

    Every run has one, so it is small: the volatile field set is shared between runs, the
    window is a list that grows to ``window`` keys (a ring from then on), not a preallocated
    deque, and the counts are plain dicts.
    """

    __slots__ = (
        "_counts",
        "_last",
        "_next",
        "_recent",
        "_streak",
        "_streak_tools",
        "_warned",
        "idle_replies",
        "limit",
        "observed",
        "volatile",
        "window",
    )

    def __init__(
        self, limit: int | None, window: int = 30, volatile_fields: Iterable[str] = ()
    ) -> None:
        self.limit = limit
        self.window = window
        self.volatile = _shared(volatile_fields)
        self._recent: list[str] = []  # the last ``window`` keys; a ring once full
        self._next = 0  # where the ring writes next (its oldest key)
        self._counts: dict[str, int] = {}
        self._streak = 0
        self._streak_tools: dict[str, int] = {}
        self._warned = False
        self._last = "progress"
        self.observed = 0
        self.idle_replies = 0  # consecutive replies that were not answers

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict:
        self.observed += 1
        self.idle_replies = 0  # the model acted: idle replies start counting again
        key = _window_key(result, is_error, self.volatile)
        fresh = key not in self._counts
        self._remember(key)
        if fresh:
            self._streak, self._warned = 1, False
            self._streak_tools = {tool: 1}
            return self._verdict("progress")
        self._streak += 1
        self._streak_tools[tool] = self._streak_tools.get(tool, 0) + 1
        if self.limit is None:
            return self._verdict("repeated")
        if self._streak >= self.limit:
            return self._verdict(
                "stalled",
                evidence={
                    "reason": "no_progress",
                    "limit": self.limit,
                    "repeated_results": self._streak,
                    "signature": signature(result, is_error, self.volatile),
                    "tools": dict(self._streak_tools),
                },
            )
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

    def observe_reply(self, text: str) -> Verdict:
        """A reply that is not an answer: ``limit`` of them in a row stall the run."""
        self.idle_replies += 1
        if self.limit is not None and self.idle_replies >= self.limit:
            evidence = {"idle_replies": self.idle_replies, "last_reply": text[:200]}
            return Verdict("stalled", None, evidence)
        return Verdict("repeated")  # not the tool results' verdict: statistics() keep theirs

    def _remember(self, key: str) -> None:
        recent, counts = self._recent, self._counts
        if len(recent) < self.window:
            recent.append(key)
        else:  # full: the key replaces the oldest
            old = recent[self._next]
            if counts[old] == 1:
                del counts[old]
            else:
                counts[old] -= 1
            recent[self._next] = key
            self._next = (self._next + 1) % self.window
        counts[key] = counts.get(key, 0) + 1

    def _verdict(
        self, kind: Any, warning: str | None = None, evidence: Mapping[str, Any] | None = None
    ) -> Verdict:
        self._last = kind
        if warning is None and not evidence:
            return _PLAIN[kind]
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
