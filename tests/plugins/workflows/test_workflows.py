"""Workflows, outcome assertions and same-id recovery (seed: "Progress and completion",
"Workflow recovery")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import trio

from soulacy.kernel import ConfigError, Kernel, Tool
from soulacy.kernel.store import Checkpoint, StorageError
from soulacy.plugins.memory_store import MemoryStore
from soulacy.plugins.workflows import reconcile
from soulacy.testing import Workspace, throwaway_plugin


class Calls:
    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.gate = trio.Event()
        self.gate.set()
        self.store_started = trio.Event()

    def plugin(self) -> Any:
        def fetch(url: str) -> dict[str, Any]:
            """Fetch a URL."""
            self.count["fetch"] += 1
            return {"status": 200, "url": url, "items": [1, 2, 3]}

        async def store_it(data: dict[str, Any]) -> str:
            """Store data."""
            self.count["store"] += 1
            self.store_started.set()
            await self.gate.wait()
            return f"stored {len(data['items'])} items"

        def fail() -> str:
            """Fails."""
            self.count["fail"] += 1
            raise RuntimeError("no")

        tools = [Tool.from_function(f) for f in (fetch, store_it, fail)]
        return throwaway_plugin("calls", soulacy_tools=lambda kernel, agent_id: tools)


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def load(make_kernel: Callable[..., Kernel], calls: Calls) -> Callable[..., Kernel]:
    def load(**options: Any) -> Kernel:
        options.setdefault("plugins", ["no:sqlite_store"])
        return make_kernel(extra_plugins=[calls.plugin()], **options)

    return load


STEPS = {
    "steps": [
        {"id": "fetch", "tool": "fetch", "arguments": {"url": "{input}"}},
        {"id": "store", "tool": "store_it", "arguments": {"data": "{steps.fetch.result}"}},
    ]
}
TOOLS = ["fetch", "store_it", "fail"]


def agent(workspace: Workspace, workflow: dict[str, Any] = STEPS, **keys: Any) -> None:
    workspace.write_agent("wf", {"tools": TOOLS, "workflow": workflow, **keys})


async def test_a_step_workflow_runs_its_steps_in_order(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    result = await load().run("wf", "https://example.org")
    assert (result.status, result.reply) == ("completed", "stored 3 items")
    assert calls.count == {"fetch": 1, "store": 1}


async def test_with_no_assertions_completion_is_explicitly_unverified(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    agent(workspace)
    result = await load().run("wf", "u")
    assert (result.status, result.verification) == ("completed", "unverified")
    assert result.assertions == []


@pytest.mark.parametrize(
    ("assertions", "enforce", "status", "verification"),
    [
        (
            [{"target": "steps.fetch.result.status", "op": "eq", "value": 200}],
            "report",
            "completed",
            "verified",
        ),
        (
            [{"target": "steps.fetch.result.status", "op": "eq", "value": 404}],
            "report",
            "completed",
            "failed",
        ),
        (
            [{"target": "steps.fetch.result.status", "op": "eq", "value": 404}],
            "fail",
            "failed",
            "failed",
        ),
        (
            [
                {"target": "reply", "op": "contains", "value": "3 items"},
                {"target": "steps.fetch.result.items", "op": "exists"},
            ],
            "report",
            "completed",
            "verified",
        ),
    ],
)
async def test_declared_outcome_assertions_verify_the_run(
    workspace: Workspace,
    load: Callable[..., Kernel],
    assertions: list[dict[str, Any]],
    enforce: str,
    status: str,
    verification: str,
) -> None:
    agent(workspace, outcome={"assertions": assertions, "enforce": enforce})
    result = await load().run("wf", "u")
    assert (result.status, result.verification) == (status, verification)
    assert len(result.assertions) == len(assertions)
    assert all("actual" in a and "passed" in a for a in result.assertions)


async def test_a_graph_workflow_follows_its_edges(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    graph = {
        "nodes": [
            {
                "id": "fetch",
                "tool": "fetch",
                "arguments": {"url": "u"},
                "next": [
                    {
                        "to": "store",
                        "when": {"target": "steps.fetch.result.status", "op": "eq", "value": 200},
                    },
                    {"to": "end"},
                ],
            },
            {"id": "store", "tool": "store_it", "arguments": {"data": "{steps.fetch.result}"}},
        ]
    }
    agent(
        workspace,
        graph,
        outcome={
            "assertions": [{"target": "steps.store.status", "op": "eq", "value": "completed"}]
        },
    )
    result = await load().run("wf", "go")
    assert (result.status, result.verification) == ("completed", "verified")
    assert calls.count == {"fetch": 1, "store": 1}


async def test_a_graph_loop_is_bounded_by_the_turn_allowance(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    graph = {
        "nodes": [
            {"id": "fetch", "tool": "fetch", "arguments": {"url": "u"}, "next": [{"to": "fetch"}]}
        ]
    }
    agent(workspace, graph, max_turns=5, no_progress_limit=0)
    result = await load().run("wf", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns")
    assert calls.count["fetch"] == 5


async def test_a_failing_step_fails_the_run_with_its_evidence(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    agent(workspace, {"steps": [{"id": "boom", "tool": "fail"}]})
    result = await load().run("wf", "go")
    assert (result.status, result.incomplete_reason) == ("failed", "step_failed")
    assert result.evidence is not None
    assert result.evidence["step"] == "boom"


async def test_a_retry_with_the_same_run_id_restores_completed_steps(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(
        workspace,
        outcome={"assertions": [{"target": "steps.fetch.result.status", "op": "eq", "value": 200}]},
    )
    kernel = load()
    first = await kernel.run("wf", "u", run_id="r1", session_id="s")
    second = await kernel.run("wf", "u", run_id="r1", session_id="s")
    assert (first.status, second.status) == ("completed", "completed")
    assert calls.count == {"fetch": 1, "store": 1}  # completed steps never execute twice
    assert second.verification == "verified"  # restored with their outcome evidence


@pytest.mark.parametrize(
    ("change", "part"),
    [
        ({"text": "other input"}, "input_sha256"),
        ({"session_id": "other"}, "session_id"),
        ({"user_id": "mallory"}, "user_id"),
        ({"principal": "key-2"}, "principal"),
    ],
)
async def test_a_retry_whose_identity_differs_is_refused_naming_the_part(
    workspace: Workspace,
    load: Callable[..., Kernel],
    calls: Calls,
    change: dict[str, Any],
    part: str,
) -> None:
    agent(workspace)
    kernel = load()
    base = {"text": "u", "session_id": "s", "user_id": "alice", "principal": "key-1"}
    await kernel.run(
        "wf", base["text"], run_id="r1", **{k: v for k, v in base.items() if k != "text"}
    )
    retry = {**base, **change}
    text = retry.pop("text")
    result = await kernel.run("wf", text, run_id="r1", **retry)
    assert (result.status, result.incomplete_reason) == ("failed", "identity_mismatch")
    assert part in (result.error or "")
    assert calls.count == {"fetch": 1, "store": 1}


async def test_a_changed_workflow_is_a_different_identity(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    agent(workspace)
    first = load(plugins=[])  # the SQLite store: the second kernel reads the same file
    await first.run("wf", "u", run_id="r1", session_id="s")
    await first.aclose()
    agent(workspace, {**STEPS, "version": "2"})
    second = load(plugins=[])
    result = await second.run("wf", "u", run_id="r1", session_id="s")
    await second.aclose()
    assert "workflow_version" in (result.error or "")


async def test_an_interrupted_step_is_refused_until_reconciled(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    kernel = load()
    calls.gate = trio.Event()  # "store" blocks: cancel the run in the middle of the step
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("wf", "u", run_id="r1", session_id="s"))
        await calls.store_started.wait()  # fetch runs in a worker thread first
        kernel.cancel_run("r1")
    calls.gate.set()
    refused = await kernel.run("wf", "u", run_id="r1", session_id="s")
    assert (refused.status, refused.incomplete_reason) == ("failed", "needs_reconciliation")
    assert "soulacy runs reconcile r1 --step store --completed|--failed" in (refused.error or "")
    assert calls.count == {"fetch": 1, "store": 1}
    await reconcile(kernel, "r1", "store", "failed")  # it did not happen: run it again
    done = await kernel.run("wf", "u", run_id="r1", session_id="s")
    assert done.status == "completed"
    assert calls.count == {"fetch": 1, "store": 2}


async def test_legacy_checkpoints_need_reconciliation(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    kernel = load()
    store = kernel.store()
    await store.save_checkpoint(
        Checkpoint(
            "old", "fetch", "completed", "wf", {"result": {"status": 200, "items": [1]}}, None
        )
    )
    refused = await kernel.run("wf", "u", run_id="old", session_id="s")
    assert refused.incomplete_reason == "needs_reconciliation"
    assert "--accept|--discard" in (refused.error or "")
    assert await reconcile(kernel, "old", None, "accept") == (
        "accepted 1 legacy checkpoint(s) of run 'old' for the next retry"
    )
    done = await kernel.run("wf", "u", run_id="old", session_id="s")
    assert (done.status, done.reply) == ("completed", "stored 1 items")
    assert calls.count == {"store": 1}  # the accepted fetch was reused


async def test_discarding_legacy_checkpoints_runs_the_steps_afresh(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    kernel = load()
    await kernel.store().save_checkpoint(
        Checkpoint("old", "fetch", "completed", "wf", {"result": {}}, None)
    )
    assert "discarded 1" in await reconcile(kernel, "old", None, "discard")
    done = await kernel.run("wf", "u", run_id="old", session_id="s")
    assert done.status == "completed"
    assert calls.count == {"fetch": 1, "store": 1}


async def test_concurrent_retries_in_one_process_serialize(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    kernel = load()
    results = []

    async def retry() -> None:
        results.append(await kernel.run("wf", "u", run_id="r1", session_id="s"))

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(retry)
    assert [r.status for r in results] == ["completed"] * 3
    assert calls.count == {"fetch": 1, "store": 1}


async def test_a_checkpoint_storage_failure_is_surfaced_not_read_as_missing(
    workspace: Workspace, make_kernel: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)

    class Broken(MemoryStore):
        async def load_checkpoints(self, run_id: str) -> list[Checkpoint]:
            raise StorageError("checkpoint store unavailable")

    broken = throwaway_plugin("broken", soulacy_store=lambda kernel: Broken())
    kernel = make_kernel(extra_plugins=[calls.plugin(), broken], plugins=["no:sqlite_store"])
    result = await kernel.run("wf", "u", run_id="r1")
    assert (result.status, result.incomplete_reason) == ("failed", "storage_error")
    assert result.error == "checkpoint store unavailable"
    assert calls.count == {}


async def test_model_turn_and_sub_agent_steps(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent("helper", [{"text": "helped"}])
    workspace.write_agent(
        "wf",
        {
            "llm": {"provider": "scripted", "model": "agents/wf/script.yaml"},
            "tools": TOOLS,
            "workflow": {
                "steps": [
                    {"id": "think", "prompt": "Think about {input}"},
                    {"id": "ask", "agent": "helper", "input": "Help with {steps.think.result}"},
                ]
            },
        },
    )
    (workspace.path / "agents" / "wf" / "script.yaml").write_text("steps:\n  - text: thought\n")
    result = await load().run("wf", "x")
    assert (result.status, result.reply) == ("completed", "helped")


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        (
            {"steps": [{"id": "a", "tool": "fetch", "prompt": "x"}]},
            "expected exactly one of tool, prompt, agent",
        ),
        ({"steps": [{"id": "a", "tool": "nope"}]}, "not among the agent's tools"),
        (
            {"steps": [{"id": "a", "tool": "fetch"}, {"id": "a", "tool": "fetch"}]},
            "duplicate step id",
        ),
        ({"nodes": [{"id": "a", "tool": "fetch", "next": [{"to": "b"}]}]}, "no node has this id"),
        ({"steps": [], "nodes": []}, "expected either steps"),
    ],
)
def test_bad_workflows_are_config_errors(
    workspace: Workspace, load: Callable[..., Kernel], workflow: dict[str, Any], message: str
) -> None:
    agent(workspace, workflow)
    with pytest.raises(ConfigError, match=message):
        load().agent("wf")


def test_a_plugin_adds_an_assertion_operator(
    workspace: Workspace, make_kernel: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace, outcome={"assertions": [{"target": "reply", "op": "shouts", "value": 1}]})
    with pytest.raises(ConfigError, match="unknown operator"):
        make_kernel(extra_plugins=[calls.plugin()]).agent("wf")
    ops = throwaway_plugin(
        "ops",
        soulacy_assertion_operators=lambda: {
            "shouts": lambda actual, expected: str(actual).isupper()
        },
    )
    assert make_kernel(extra_plugins=[calls.plugin(), ops]).agent("wf").id == "wf"


async def test_a_refused_retry_leaves_the_run_it_names_untouched(
    workspace: Workspace, make_kernel: Callable[..., Kernel], calls: Calls
) -> None:
    agent(
        workspace,
        outcome={"assertions": [{"target": "steps.fetch.result.status", "op": "eq", "value": 200}]},
    )
    kernel = make_kernel(extra_plugins=[calls.plugin()])
    try:
        done = await kernel.run("wf", "u", run_id="r1", session_id="s")
        refused = await kernel.run("wf", "other input", run_id="r1", session_id="s")
        store = kernel.store()
        run = await store.get_run("r1")
        proof = await kernel.store().get_proof("r1")
        history = await store.history("s")
    finally:
        await kernel.aclose()
    assert refused.incomplete_reason == "identity_mismatch"
    assert run is not None
    assert (run.status, run.verification) == ("completed", "verified")
    assert proof is not None
    assert proof.sha256 == done.metadata()["proof"]["sha256"]
    assert proof.data()["assertions"][0]["passed"] is True  # the proof keeps its evidence
    assert "other input" not in [e.content for e in history]


def test_a_workflow_and_a_reasoning_strategy_do_not_mix(
    workspace: Workspace, load: Callable[..., Kernel]
) -> None:
    agent(workspace, reasoning={"strategy": "react"})
    with pytest.raises(ConfigError, match="a workflow or a reasoning strategy, not both"):
        load().agent("wf")


async def test_an_accepted_legacy_step_in_progress_still_needs_reconciling(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(workspace)
    kernel = load()
    await kernel.store().save_checkpoint(
        Checkpoint("old", "fetch", "in_progress", "wf", None, {"accepted": True})
    )
    refused = await kernel.run("wf", "u", run_id="old", session_id="s")
    assert refused.incomplete_reason == "needs_reconciliation"
    assert calls.count == {}


async def test_a_bad_reference_fails_before_the_step_is_marked_in_progress(
    workspace: Workspace, load: Callable[..., Kernel], calls: Calls
) -> None:
    agent(
        workspace,
        {"steps": [{"id": "a", "tool": "fetch", "arguments": {"url": "{steps.nope.result}"}}]},
    )
    kernel = load()
    result = await kernel.run("wf", "u", run_id="r", session_id="s")
    assert "unknown reference" in (result.error or "")
    assert await kernel.store().load_checkpoints("r") == []
