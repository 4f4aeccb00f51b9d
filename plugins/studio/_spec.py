"""The build spec: what a person asks one Studio build for, as a YAML file or a mapping."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from soulacy.kernel import ConfigError, ConfigIssue, Location, UsageError, load_document, structure

AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

# The execution limits of SOUL.yaml. A generated agent inherits the workspace policy, so these
# are written only when the person asks for them (``limits:`` of the spec) or already has them.
LIMIT_PATHS: tuple[tuple[str, ...], ...] = (
    ("max_turns",),
    ("budget",),
    ("run_timeout",),
    ("no_progress_limit",),
    ("reasoning", "max_steps"),
    ("reasoning", "step_timeout"),
    ("reasoning", "total_timeout"),
    ("llm", "max_tokens"),
)
OPERATORS = ("contains", "not_contains", "eq", "ne", "matches")


@attrs.frozen
class Expectation:
    """``target`` is ``reply`` or a path into the run's metadata (``status``, ``tokens.total``)."""

    target: str = "reply"
    op: str = "contains"
    value: Any = None


@attrs.frozen
class Check:
    """Run the candidate agent on ``input``; every expectation must hold. Unless one of them
    is about ``status``, the run must also end ``completed``."""

    input: str
    expect: list[Expectation] = attrs.Factory(list)
    name: str | None = None


@attrs.frozen
class BuilderModel:
    """The model that writes the agent (default: ``llm.default`` of config.yaml)."""

    provider: str | None = None
    model: str | None = None


@attrs.frozen
class BuildSpec:
    """One build. ``id`` names ``agents/<id>/SOUL.yaml``: repaired when it exists, else new.

    ``name``, ``description``, ``tools``, ``llm`` and ``limits`` are the person's explicit
    choices and are written as given, whatever the model says; ``limits`` mirrors SOUL.yaml
    (``{max_turns: 40, budget: {max_tokens: 100000}, reasoning: {max_steps: 8}}``).
    """

    id: str
    goal: str
    name: str | None = None
    description: str | None = None
    tools: list[str] | None = None
    llm: dict[str, Any] = attrs.Factory(dict)
    limits: dict[str, Any] = attrs.Factory(dict)
    checks: list[Check] = attrs.Factory(list)
    model: BuilderModel = BuilderModel()

    def asked_limits(self) -> dict[tuple[str, ...], Any]:
        """The limits the person asked for, by SOUL.yaml path (``llm.max_tokens`` included)."""
        asked = dict(_limit_leaves(self.limits))
        if "max_tokens" in self.llm:
            asked[("llm", "max_tokens")] = self.llm["max_tokens"]
        return asked


def _limit_leaves(
    node: Mapping[str, Any], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``{reasoning: {max_steps: 5}}`` -> ``(("reasoning", "max_steps"), 5)``; a limit that is a
    mapping as a whole (``budget``) stays one leaf. Non-limit paths come out as they are."""
    for key, value in node.items():
        path = (*prefix, str(key))
        below = [p for p in LIMIT_PATHS if p[: len(path)] == path and len(p) > len(path)]
        if below and isinstance(value, Mapping):
            yield from _limit_leaves(value, path)
        else:
            yield path, value


def load_spec(path: str | Path) -> BuildSpec:
    """Read and check a build spec file; problems raise one ConfigError pointing at lines."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"build spec {str(file)!r} does not exist")
    spec: BuildSpec = load_document(file, BuildSpec)
    _check(spec, str(file))
    return spec


def as_spec(spec: BuildSpec | Mapping[str, Any]) -> BuildSpec:
    """A spec given to the Python API: a ``BuildSpec``, or a mapping structured strictly."""
    checked: BuildSpec = (
        spec
        if isinstance(spec, BuildSpec)
        else structure(dict(spec), BuildSpec, origin="build spec", key="spec")
    )
    _check(checked, "build spec")
    return checked


def _check(spec: BuildSpec, origin: str) -> None:
    issues: list[ConfigIssue] = []

    def issue(path: str, message: str, value: Any = None, has_value: bool = True) -> None:
        issues.append(ConfigIssue(Location(origin), path, message, value, has_value))

    if not spec.id:
        issue("id", "required key is missing", has_value=False)
    elif not AGENT_ID.fullmatch(spec.id):
        issue("id", "expected letters, digits, '-' and '_'", spec.id)
    if not spec.goal or not spec.goal.strip():
        issue("goal", "required: what the agent is for", spec.goal)
    for path, value in _limit_leaves(spec.limits):
        if path not in LIMIT_PATHS:
            known = ", ".join(".".join(p) for p in LIMIT_PATHS)
            issue("limits." + ".".join(path), f"not an execution limit (limits: {known})", value)
    for n, check in enumerate(spec.checks):
        if not (check.input or "").strip():
            issue(f"checks.{n}.input", "required: the request to run", check.input)
        for m, expect in enumerate(check.expect):
            if expect.op not in OPERATORS:
                expected = f"expected one of {', '.join(OPERATORS)}"
                issue(f"checks.{n}.expect.{m}.op", expected, expect.op)
            if not expect.target:
                issue(f"checks.{n}.expect.{m}.target", "required: reply, status, …", expect.target)
    if issues:
        raise ConfigError(issues)
