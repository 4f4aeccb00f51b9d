"""Outcome assertions: operators and how targets are found in a run's evidence."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ._model import Assertion

Operator = Callable[[Any, Any], bool]
MISSING = object()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _compare(test: Callable[[float, float], bool]) -> Operator:
    def op(actual: Any, expected: Any) -> bool:
        a, e = _number(actual), _number(expected)
        return a is not None and e is not None and test(a, e)

    return op


BUILTIN_OPERATORS: dict[str, Operator] = {
    "eq": lambda actual, expected: actual == expected,
    "ne": lambda actual, expected: actual != expected,
    "gt": _compare(lambda a, e: a > e),
    "ge": _compare(lambda a, e: a >= e),
    "lt": _compare(lambda a, e: a < e),
    "le": _compare(lambda a, e: a <= e),
    "contains": lambda actual, expected: (
        actual is not MISSING and actual is not None and expected in actual
    ),
    "not_contains": lambda actual, expected: (
        actual is MISSING or actual is None or expected not in actual
    ),
    "matches": lambda actual, expected: (
        isinstance(actual, str) and re.search(str(expected), actual) is not None
    ),
    "in": lambda actual, expected: actual in (expected or ()),
    "exists": lambda actual, expected: (actual is not MISSING) == (expected is not False),
    "truthy": lambda actual, expected: bool(actual) and actual is not MISSING,
}


def lookup(evidence: Mapping[str, Any], target: str) -> Any:
    """``steps.fetch.result.items.0.name`` -> the value, or MISSING."""
    node: Any = evidence
    for part in target.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif (
            isinstance(node, list | tuple)
            and part.lstrip("-").isdigit()
            and (-len(node) <= int(part) < len(node))
        ):
            node = node[int(part)]
        else:
            return MISSING
    return node


def evaluate(
    assertion: Assertion, evidence: Mapping[str, Any], operators: Mapping[str, Operator]
) -> dict[str, Any]:
    """The evidence of one assertion: what was expected, what was found, and the verdict."""
    actual = lookup(evidence, assertion.target)
    op = operators.get(assertion.op)
    try:
        passed = bool(op(actual, assertion.value)) if op is not None else False
        error = None if op is not None else f"unknown operator {assertion.op!r}"
    except Exception as exc:  # a bad comparison is a failed assertion, said as such
        passed, error = False, f"{type(exc).__name__}: {exc}"
    out: dict[str, Any] = {
        "target": assertion.target,
        "op": assertion.op,
        "value": assertion.value,
        "actual": None if actual is MISSING else actual,
        "found": actual is not MISSING,
        "passed": passed,
    }
    if assertion.describe:
        out["describe"] = assertion.describe
    if error:
        out["error"] = error
    return out
