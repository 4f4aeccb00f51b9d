"""The span tree of runs: classic, workflow, reasoning, failed, incomplete, retried."""

from __future__ import annotations

import json
from collections.abc import Callable

from conftest import ADD, Traced, children, within
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from soulacy.testing import Workspace

CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "soulacy.user.id",
}


async def test_a_classic_run_is_a_span_with_a_child_per_model_and_tool_call(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Adder")
    result = await t.kernel.run(
        "adder", "19 + 23?", session_id="s1", run_id="r1", principal="alice", user_id="u1"
    )
    assert result.status == "completed"
    spans = t.spans()
    assert sorted(s.name for s in spans) == sorted(
        [
            "invoke_agent Adder",  # invoke_agent {gen_ai.agent.name}
            "chat agents/adder/script.yaml",
            "execute_tool add",
            "chat agents/adder/script.yaml",
        ]
    )
    run = t.one("invoke_agent Adder")
    assert run.parent is None
    assert run.kind is SpanKind.INTERNAL
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}
    kids = children(spans, run)
    assert [s.name for s in kids] == [
        "chat agents/adder/script.yaml",
        "execute_tool add",
        "chat agents/adder/script.yaml",
    ]
    assert all(within(kid, run) for kid in kids)
    assert kids[0].end_time <= kids[1].start_time
    assert kids[1].end_time <= kids[2].start_time
    a = run.attributes
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert (a["gen_ai.agent.id"], a["gen_ai.agent.name"]) == ("adder", "Adder")
    assert (a["soulacy.run.id"], a["soulacy.session.id"], a["gen_ai.conversation.id"]) == (
        "r1",
        "s1",
        "s1",
    )
    assert a["soulacy.principal"] == "alice"
    assert a["soulacy.run.status"] == "completed"
    assert "soulacy.run.incomplete_reason" not in a
    assert a["soulacy.run.verification"] == "unverified"
    assert a["soulacy.run.attempt"] == 1
    assert (a["soulacy.run.turns"], a["soulacy.run.llm_calls"], a["soulacy.run.tool_calls"]) == (
        2,
        2,
        1,
    )
    assert a["soulacy.run.strategy"] == "classic"
    assert a["soulacy.limit.max_turns"] == result_limit(t, "max_turns")
    assert a["soulacy.limit.max_tokens"] == "unlimited"
    assert a["gen_ai.usage.output_tokens"] == result.output_tokens
    assert run.status.status_code is StatusCode.UNSET

    chat = kids[0]
    c = chat.attributes
    assert chat.kind is SpanKind.CLIENT
    assert c["gen_ai.operation.name"] == "chat"
    assert c["gen_ai.request.model"] == "agents/adder/script.yaml"
    assert c["gen_ai.provider.name"] == c["gen_ai.system"] == "scripted"
    assert c["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert kids[2].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert (c["gen_ai.usage.input_tokens"], c["gen_ai.usage.output_tokens"]) == (0, 1)
    assert (c["soulacy.turn"], c["soulacy.llm.tool_calls"]) == (1, 1)

    tool = kids[1].attributes
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.call.id"]) == ("add", "c1")
    assert tool["gen_ai.tool.type"] == "function"
    assert (tool["soulacy.tool.verdict"], tool["soulacy.tool.replayed"]) == ("progress", False)
    assert tool["soulacy.tool.result_chars"] == 2
    # contents are off by default: the request, the reply, arguments, results, the user id
    for span in spans:
        assert not CONTENT_KEYS & set(span.attributes or {}), span.name


def result_limit(t: Traced, name: str) -> object:
    return t.kernel.resolve_policy("adder", {}).limits()[name].value


async def test_contents_are_recorded_when_configured(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("otel:\n  capture_content: true\n  max_content_chars: 40\n")
    workspace.scripted_agent("adder", ADD, tools=["add"])
    await t.kernel.run("adder", "19 + 23? my key is api_key=sk-abcdefghijkl", user_id="u1")
    run = t.one("invoke_agent adder")
    [message] = json.loads(str(run.attributes["gen_ai.input.messages"]))
    assert message["role"] == "user"
    text = message["parts"][0]["content"]
    assert text.startswith("19 + 23?")
    assert "sk-abcdefghijkl" not in text
    [reply] = json.loads(str(run.attributes["gen_ai.output.messages"]))
    assert reply["parts"][0]["content"] == "19 + 23 = 42"
    assert run.attributes["soulacy.user.id"] == "u1"
    tool = t.one("execute_tool add").attributes
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"numbers": [19, 23]}
    assert tool["gen_ai.tool.call.result"] == "42"


async def test_a_workflow_run_carries_its_trace_through_steps_and_sub_runs(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent(
        "report",
        [{"text": "Mild: 12.5 to 14.0."}],
        tools=["fetch"],
        workflow={
            "steps": [
                {"id": "fetch", "tool": "fetch", "arguments": {"city": "{input}"}},
                {"id": "summary", "prompt": "Summarize: {steps.fetch.result.readings}"},
            ]
        },
    )
    result = await t.kernel.run("report", "Oslo", run_id="W1")
    assert result.status == "completed", result.metadata()
    spans = t.spans()
    run = _run_span(spans, "W1")
    assert run.parent is None
    assert run.attributes["soulacy.run.strategy"] == "workflows"
    steps = children(spans, run)
    assert [s.name for s in steps] == ["workflow.step fetch", "workflow.step summary"]
    assert [s.attributes["soulacy.workflow.step.status"] for s in steps] == [
        "completed",
        "completed",
    ]
    [tool] = children(spans, steps[0])
    assert tool.name == "execute_tool fetch"
    assert within(tool, steps[0])
    [sub] = children(spans, steps[1])
    assert sub.name == "invoke_agent report"
    assert within(sub, steps[1])
    assert sub.attributes["soulacy.run.id"] == "W1:summary"
    assert sub.attributes["soulacy.parent_run.id"] == "W1"
    assert sub.attributes["soulacy.run.strategy"] == "classic"
    [chat] = children(spans, sub)
    assert chat.name.startswith("chat ")
    assert {s.context.trace_id for s in spans if s.context} == {run.context.trace_id}
    assert t.metric("soulacy.workflow.steps", **{"soulacy.workflow.step.status": "completed"}) == 2


def _run_span(spans: list[ReadableSpan], run_id: str) -> ReadableSpan:
    [found] = [
        s
        for s in spans
        if (s.name or "").startswith("invoke_agent ")
        and (s.attributes or {}).get("soulacy.run.id") == run_id
    ]
    return found


async def test_a_reasoning_run_has_a_span_per_step(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("thinker", ADD, tools=["add"], reasoning={"strategy": "react"})
    result = await t.kernel.run("thinker", "19 + 23?")
    assert result.status == "completed"
    spans = t.spans()
    run = t.one("invoke_agent thinker")
    assert run.attributes["soulacy.run.strategy"] == "reasoning"
    assert run.attributes["soulacy.reasoning.strategy"] == "react"
    steps = children(spans, run)
    assert [s.name for s in steps] == ["reasoning.step 1", "reasoning.step 2"]
    assert [s.attributes["soulacy.reasoning.step"] for s in steps] == [1, 2]
    assert [s.name.split(" ")[0] for s in children(spans, steps[0])] == ["chat", "execute_tool"]
    assert [s.name.split(" ")[0] for s in children(spans, steps[1])] == ["chat"]
    assert all(within(kid, step) for step in steps for kid in children(spans, step))
    assert steps[0].end_time <= steps[1].start_time


async def test_plan_and_execute_steps(traced: Callable[..., Traced], workspace: Workspace) -> None:
    t = traced()
    workspace.scripted_agent(
        "planner",
        [{"text": "1. add the numbers"}, *ADD, {"text": "42"}],
        tools=["add"],
        reasoning={"strategy": "plan_execute"},
    )
    result = await t.kernel.run("planner", "19 + 23?")
    assert result.status == "completed", result.metadata()
    spans = t.spans()
    steps = children(spans, t.one("invoke_agent planner"))
    assert [s.name for s in steps] == [f"reasoning.step {n}" for n in (1, 2, 3, 4)]
    assert [len(children(spans, s)) for s in steps] == [1, 2, 1, 1]  # the plan has no tools


async def test_a_failed_run_is_an_error_and_so_is_its_model_call(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.write_agent("down", {"llm": {"provider": "failing", "model": "m1"}})
    result = await t.kernel.run("down", "hi")
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    run = t.one("invoke_agent down")
    assert run.status.status_code is StatusCode.ERROR
    assert run.status.description
    assert run.status.description.startswith("provider_error: ")
    assert "sk-secretsecret" not in run.status.description  # errors are redacted
    assert run.attributes["error.type"] == "provider_error"
    assert run.attributes["soulacy.run.status"] == "failed"
    assert run.attributes["soulacy.run.incomplete_reason"] == "provider_error"
    assert "sk-secretsecret" not in str(run.attributes["soulacy.run.error"])
    [chat] = children(t.spans(), run)
    assert chat.name == "chat m1"
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "provider_error"
    assert chat.attributes["gen_ai.provider.name"] == "failing"
    assert t.metric("gen_ai.client.operation.duration", **{"error.type": "provider_error"}) == 1


async def test_an_incomplete_run_says_why(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("short", ADD, tools=["add"], max_turns=1)
    result = await t.kernel.run("short", "19 + 23?")
    assert (result.status, result.incomplete_reason) == ("incomplete", "max_turns")
    run = t.one("invoke_agent short")
    assert run.attributes["soulacy.run.status"] == "incomplete"
    assert run.attributes["soulacy.run.incomplete_reason"] == "max_turns"
    assert run.attributes["soulacy.limit.max_turns"] == 1
    assert run.status.status_code is StatusCode.UNSET  # not an error, never a success claim
    assert [s.name.split(" ")[0] for s in children(t.spans(), run)] == ["chat", "execute_tool"]


async def test_a_later_attempt_links_to_the_earlier_one(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.write_agent("down", {"llm": {"provider": "failing", "model": "m1"}})
    first = await t.kernel.run("down", "hi", run_id="R", session_id="S")
    second = await t.kernel.run("down", "hi", run_id="R", session_id="S")
    assert (first.attempt, second.attempt) == (1, 2)
    earlier, later = sorted(t.named("invoke_agent"), key=lambda s: s.start_time or 0)
    assert earlier.attributes["soulacy.run.attempt"] == 1
    assert later.attributes["soulacy.run.attempt"] == 2
    [link] = later.links
    assert link.context.span_id == earlier.context.span_id
    assert link.attributes["soulacy.link.type"] == "previous_attempt"
    assert earlier.context.trace_id != later.context.trace_id  # each attempt is its own trace


async def test_a_run_cancelled_while_queued_still_has_a_span(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    import trio

    t = traced()
    workspace.scripted_agent("slow", [{"text": "done", "sleep": 0.3}])
    results = {}

    async def ask(run_id: str) -> None:
        results[run_id] = await t.kernel.run("slow", "hi", session_id="same", run_id=run_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "first")
        await trio.sleep(0.05)
        nursery.start_soon(ask, "queued")
        await trio.sleep(0.05)
        assert t.kernel.cancel_run("queued")
    assert results["queued"].status == "cancelled"
    queued = _run_span(t.spans(), "queued")
    assert queued.attributes["soulacy.run.status"] == "cancelled"
    assert queued.attributes["soulacy.run.turns"] == 0
    assert queued.end_time
    assert queued.start_time
    assert queued.end_time >= queued.start_time


async def test_streamed_calls_say_when_the_first_chunk_came(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("s", [{"text": "one two three"}])
    await t.kernel.run("s", "hi", stream=True)
    chat = t.named("chat")[0].attributes
    assert chat["gen_ai.request.stream"] is True
    assert 0 <= float(chat["gen_ai.response.time_to_first_chunk"]) < 5


async def test_a_run_suspended_waiting_for_a_decision_ends_its_span_interrupted(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    """A suspended run ends here (approvals.suspend_after): its span is not left open until
    the process ends; the decision's retry is traced as a run of its own."""
    t = traced("approvals: {suspend_after: 1ms}\n")
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Adder", confirm_tools=["add"])
    result = await t.kernel.run("adder", "19 + 23?", run_id="r-s")
    assert (result.status, result.incomplete_reason) == ("interrupted", "awaiting_approval")
    run = t.one("invoke_agent Adder")
    assert run.end_time is not None
    assert run.attributes is not None
    assert run.attributes["soulacy.run.status"] == "interrupted"
    assert run.attributes["soulacy.run.incomplete_reason"] == "awaiting_approval"
