"""Stall detection by result signatures over a bounded window."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any

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


def normalize_text(text: str) -> str:
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


def signature(result: Any, is_error: bool, volatile: frozenset[str]) -> str:
    """A stable hash of what a tool returned: canonical JSON of structured results with volatile
    fields removed, text as text, and errors as errors with their message."""
    if isinstance(result, str):
        canonical = normalize_text(result)
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


class SignatureDetector:
    """One run's detector: ``limit`` consecutive results without a fresh one stall the run.

    A result is fresh when its signature is not among the last ``window`` results; the first
    result of a streak is the fresh one, so ``limit`` identical results stop the run and one
    fewer does not. Alternating tools that return evidence seen before are repeats too, since
    nothing about the arguments counts. Memory is bounded by ``window``.

    Idle replies (the tool loop's ``observe_reply``: empty, or only saying it is working on
    it) count against the same ``limit``; any tool result resets their count.
    """

    def __init__(
        self, limit: int | None, window: int = 30, volatile_fields: Iterable[str] = ()
    ) -> None:
        self.limit = limit
        self.window = window
        self.volatile = frozenset(volatile_fields)
        self._recent: deque[str] = deque(maxlen=window)
        self._counts: Counter[str] = Counter()
        self._streak = 0
        self._streak_tools: Counter[str] = Counter()
        self._warned = False
        self._last = "progress"
        self.observed = 0
        self.idle_replies = 0  # consecutive replies that were not answers

    def observe(
        self, tool: str, arguments: Mapping[str, Any], result: Any, is_error: bool
    ) -> Verdict:
        self.observed += 1
        self.idle_replies = 0  # the model acted: idle replies start counting again
        sig = signature(result, is_error, self.volatile)
        fresh = self._counts[sig] == 0
        self._remember(sig)
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
            return self._verdict(
                "stalled",
                evidence={
                    "reason": "no_progress",
                    "limit": self.limit,
                    "repeated_results": self._streak,
                    "signature": sig,
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

    def _remember(self, sig: str) -> None:
        if len(self._recent) == self._recent.maxlen:
            old = self._recent[0]
            self._counts[old] -= 1
            if not self._counts[old]:
                del self._counts[old]
        self._recent.append(sig)
        self._counts[sig] += 1

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
