"""Checks: run the candidate agent on a request and compare what came back to expectations.

A few operators are implemented here rather than borrowed from the workflows plugin, because
plugins do not import each other.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from soulacy.kernel import Kernel, RunResult, SoulacyError

from ._spec import Check, Expectation

_MISSING = object()
PREVIEW = 200  # characters of a reply quoted back to the model

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "contains": lambda actual, expected: isinstance(actual, str | list) and expected in actual,
    "not_contains": lambda actual, expected: (
        not (isinstance(actual, str | list) and expected in actual)
    ),
    "eq": lambda actual, expected: actual == expected,
    "ne": lambda actual, expected: actual != expected,
    "matches": lambda actual, expected: (
        isinstance(actual, str) and re.search(str(expected), actual) is not None
    ),
}


@attrs.frozen
class CheckResult:
    """How one check went: the run's status and reply, and every failed expectation."""

    name: str
    passed: bool
    status: str | None
    reply: str
    failures: tuple[str, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "status": self.status,
            "reply": self.reply[:PREVIEW],
            "failures": list(self.failures),
        }


def check_name(check: Check, index: int) -> str:
    return check.name or f"check {index + 1}"


async def run_check(
    kernel: Kernel, agent_id: str, check: Check, index: int, session: str
) -> CheckResult:
    """Run ``check`` against ``agent_id`` of ``kernel`` (a scratch kernel)."""
    name = check_name(check, index)
    try:
        result = await kernel.run(agent_id, check.input, session_id=session)
    except SoulacyError as exc:  # the candidate cannot run: an unknown tool, provider …
        return CheckResult(name, False, None, "", (f"the agent cannot run: {exc}",))
    failures = evaluate(check, result)
    return CheckResult(
        name,
        not failures,
        result.status,
        result.reply,
        tuple(failures),
        result.input_tokens,
        result.output_tokens,
        result.cost_usd,
    )


def evaluate(check: Check, result: RunResult) -> list[str]:
    """The failed expectations, said so that the model can act on them."""
    evidence = {**result.metadata(), "reply": result.reply}
    failures = []
    if result.status != "completed" and not any(e.target == "status" for e in check.expect):
        why = f" ({result.incomplete_reason})" if result.incomplete_reason else ""
        error = f": {result.error}" if result.error else ""
        failures.append(f"the run ended {result.status}{why}{error}")
    for expect in check.expect:
        actual = _lookup(evidence, expect.target)
        if not _holds(expect, actual):
            shown = "nothing" if actual is _MISSING else repr(_preview(actual))
            failures.append(f"expected {expect.target} {expect.op} {expect.value!r}, got {shown}")
    return failures


def _holds(expect: Expectation, actual: Any) -> bool:
    if actual is _MISSING:
        return expect.op in ("not_contains", "ne")
    try:
        return bool(OPS[expect.op](actual, expect.value))
    except (TypeError, re.error):  # a comparison that makes no sense fails, it does not crash
        return False


def _lookup(evidence: Mapping[str, Any], target: str) -> Any:
    node: Any = evidence
    for part in target.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _preview(value: Any) -> Any:
    return value[:PREVIEW] + "…" if isinstance(value, str) and len(value) > PREVIEW else value
