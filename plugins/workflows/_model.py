"""The ``workflow:`` and ``outcome:`` keys of SOUL.yaml."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import attrs

from soulacy.kernel import ConfigError, ConfigIssue, Location


@attrs.frozen
class Assertion:
    """``target`` is a path such as ``steps.fetch.result.status``, ``reply`` or ``input``."""

    target: str
    op: str = "eq"
    value: Any = None
    describe: str = ""


@attrs.frozen
class Edge:
    """A graph edge: go ``to`` a node (or ``end``) when ``when`` holds (always, if omitted)."""

    to: str
    when: Assertion | None = None


@attrs.frozen
class Step:
    """A tool call (``tool`` + ``arguments``), a model turn (``prompt``) or a sub-agent run
    (``agent`` + ``input``). Strings may refer to ``{input}`` and ``{steps.ID.result…}``."""

    id: str
    tool: str | None = None
    arguments: dict[str, Any] = attrs.Factory(dict)
    prompt: str | None = None
    agent: str | None = None
    input: str | None = None
    next: list[Edge] = attrs.Factory(list)

    @property
    def kind(self) -> Literal["tool", "prompt", "agent"]:
        if self.tool is not None:
            return "tool"
        return "prompt" if self.prompt is not None else "agent"


@attrs.frozen
class Workflow:
    """An ordered list of ``steps``, or a graph of ``nodes`` starting at ``start``."""

    steps: list[Step] = attrs.Factory(list)
    nodes: list[Step] = attrs.Factory(list)
    start: str | None = None
    version: str | None = None  # part of run identity; default: a hash of the definition

    @property
    def is_graph(self) -> bool:
        return bool(self.nodes)

    def fingerprint(self) -> str:
        if self.version:
            return self.version
        from soulacy.kernel.store import canonical_json  # the store's imports load trio

        body = canonical_json(attrs.asdict(self))
        return "sha256:" + hashlib.sha256(body.encode()).hexdigest()[:16]


@attrs.frozen
class Outcome:
    assertions: list[Assertion] = attrs.Factory(list)
    enforce: Literal["report", "fail"] = "report"
    goal: str | None = None


def check(
    workflow: Workflow | None, tools: list[str], operators: set[str], file: str
) -> list[ConfigIssue]:
    """Problems a type cannot see: one step kind each, unique ids, edges to known nodes."""
    if workflow is None:
        return []
    issues: list[ConfigIssue] = []

    def issue(path: str, message: str, value: Any = None) -> None:
        issues.append(ConfigIssue(Location(file), path, message, value, value is not None))

    if bool(workflow.steps) == bool(workflow.nodes):
        issue("workflow", "expected either steps (an ordered list) or nodes (a graph)")
    key = "nodes" if workflow.is_graph else "steps"
    steps = workflow.nodes or workflow.steps
    ids = [s.id for s in steps]
    names = {t.rpartition(":")[2] for t in tools}
    for n, step in enumerate(steps):
        path = f"workflow.{key}[{n}]"
        kinds = [k for k in ("tool", "prompt", "agent") if getattr(step, k) is not None]
        if len(kinds) != 1:
            issue(path, "expected exactly one of tool, prompt, agent", kinds or None)
        if ids.count(step.id) > 1:
            issue(f"{path}.id", "duplicate step id", step.id)
        if step.tool is not None and step.tool not in names:
            issue(
                f"{path}.tool",
                f"not among the agent's tools ({', '.join(sorted(names))})",
                step.tool,
            )
        for m, edge in enumerate(step.next):
            if edge.to != "end" and edge.to not in ids:
                issue(f"{path}.next[{m}].to", "no node has this id (or use 'end')", edge.to)
            if edge.when is not None and edge.when.op not in operators:
                issue(
                    f"{path}.next[{m}].when.op",
                    f"unknown operator ({', '.join(sorted(operators))})",
                    edge.when.op,
                )
        if step.next and not workflow.is_graph:
            issue(f"{path}.next", "edges belong to graph workflows (nodes)")
    if workflow.start is not None and workflow.start not in ids:
        issue("workflow.start", "no node has this id", workflow.start)
    return issues


def raise_if(issues: list[ConfigIssue]) -> None:
    if issues:
        raise ConfigError(issues)
