"""Metrics through the SDK's MeterProvider, the Prometheus text, and the span bounds."""

from __future__ import annotations

import re
from collections.abc import Callable

from conftest import ADD, Traced

from soulacy.contrib.otel import render_prometheus
from soulacy.contrib.otel._prometheus import metric_name
from soulacy.testing import Workspace

PRICED = "costs:\n  pricing:\n    - {model: '*', input_per_mtok: 0, output_per_mtok: 1000000}\n"


async def test_runs_calls_tokens_cost_and_durations_are_counted(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(PRICED)
    workspace.scripted_agent("adder", ADD, tools=["add"])
    workspace.scripted_agent("short", ADD, tools=["add"], max_turns=1)
    workspace.write_agent("down", {"llm": {"provider": "failing", "model": "m1"}})
    workspace.scripted_agent(
        "stuck",
        [{"tool": "same", "arguments": {"x": 1}}],
        tools=["same"],
        repeat=True,
        no_progress_limit=3,
    )
    done = await t.kernel.run("adder", "19 + 23?")
    again = await t.kernel.run("adder", "again")  # the script again, from its first step
    short = await t.kernel.run("short", "19 + 23?")
    failed = await t.kernel.run("down", "hi")
    stuck = await t.kernel.run("stuck", "go")
    assert (done.status, short.incomplete_reason, failed.incomplete_reason) == (
        "completed",
        "max_turns",
        "provider_error",
    )
    assert stuck.incomplete_reason == "no_progress"

    def runs(**labels: str) -> float:
        return t.metric("soulacy.runs", **labels)

    assert runs(**{"soulacy.agent.id": "adder", "soulacy.run.status": "completed"}) == 2
    assert runs(
        **{"soulacy.run.status": "incomplete", "soulacy.run.incomplete_reason": "max_turns"}
    )
    assert runs(**{"soulacy.run.incomplete_reason": "provider_error"}) == 1
    assert runs(**{"soulacy.run.incomplete_reason": "none"}) == 2
    assert runs() == 5
    assert t.metric("soulacy.runs.active") == 0
    assert t.metric("soulacy.run.duration") == 5  # a histogram: its count
    assert t.metric("soulacy.run.duration", **{"soulacy.run.status": "failed"}) == 1
    calls = done.llm_calls + again.llm_calls + short.llm_calls + failed.llm_calls + stuck.llm_calls
    assert t.metric("soulacy.model.calls") == calls
    assert t.metric("gen_ai.client.operation.duration") == calls
    assert t.metric("gen_ai.client.operation.duration", **{"error.type": "provider_error"}) == 1
    assert t.metric("soulacy.model.calls", **{"gen_ai.provider.name": "failing"}) == 1
    output = done.output_tokens + again.output_tokens + short.output_tokens + stuck.output_tokens
    assert t.metric("soulacy.tokens", **{"gen_ai.token.type": "output"}) == output
    assert t.metric("soulacy.cost") == output  # 1 USD per output token, as priced
    tools = {"gen_ai.tool.name": "add", "soulacy.tool.outcome": "ok"}
    assert t.metric("soulacy.tool.calls", **tools) == 3
    assert t.metric("soulacy.tool.calls", **{"gen_ai.tool.name": "same"}) == stuck.tool_calls
    assert t.metric("soulacy.progress.stops", **{"soulacy.progress.kind": "stalled_tool"}) == 1
    assert t.metric("soulacy.progress.verdicts", **{"soulacy.tool.verdict": "stalled"}) == 1
    assert t.metric("soulacy.progress.verdicts", **{"soulacy.tool.verdict": "repeated"}) >= 1


async def test_active_runs_go_up_and_down(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    import trio

    t = traced()
    workspace.scripted_agent("slow", [{"text": "done", "sleep": 0.2}], repeat=True)
    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(lambda n=n: t.kernel.run("slow", "hi", session_id=f"s{n}"))
        await trio.sleep(0.1)
        assert t.metric("soulacy.runs.active", **{"soulacy.agent.id": "slow"}) == 3
    assert t.metric("soulacy.runs.active") == 0


async def test_the_prometheus_text(traced: Callable[..., Traced], workspace: Workspace) -> None:
    t = traced(PRICED)
    workspace.scripted_agent("adder", ADD, tools=["add"])
    result = await t.kernel.run("adder", "19 + 23?")
    out = result.output_tokens
    text = t.telemetry.prometheus_text()
    assert text.endswith("\n")
    assert "# TYPE soulacy_runs_total counter" in text
    assert re.search(r'^soulacy_runs_total\{soulacy_agent_id="adder",.*\} 1$', text, re.M)
    assert "# TYPE soulacy_runs_active gauge" in text
    assert "# TYPE soulacy_run_duration_seconds histogram" in text
    assert "# TYPE gen_ai_client_operation_duration_seconds histogram" in text
    assert re.search(rf"^soulacy_cost_usd_total\{{.*\}} {out}\.0$", text, re.M)
    assert re.search(rf'^soulacy_tokens_total\{{.*gen_ai_token_type="output"\}} {out}$', text, re.M)
    assert "target_info{" in text
    assert 'service_name="soulacy"' in text
    # buckets are cumulative and end with +Inf, which equals _count
    buckets = [
        int(m.group(1))
        for m in re.finditer(
            r"^gen_ai_client_operation_duration_seconds_bucket\{.*\} (\d+)$", text, re.M
        )
    ]
    assert buckets == sorted(buckets)
    assert buckets[-1] == 2
    count = re.search(r"^gen_ai_client_operation_duration_seconds_count\{.*\} (\d+)$", text, re.M)
    assert count
    assert int(count.group(1)) == 2
    for line in text.splitlines():  # every sample line is NAME{labels} VALUE
        if not line.startswith("#"):
            assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? \S+", line), line


def test_prometheus_names_and_escaping() -> None:
    assert metric_name("soulacy.run.duration", "s", False) == "soulacy_run_duration_seconds"
    assert metric_name("soulacy.runs", "{run}", True) == "soulacy_runs_total"
    assert metric_name("soulacy.cost", "USD", True) == "soulacy_cost_usd_total"
    assert metric_name("x.size", "By", False) == "x_size_bytes"
    assert metric_name("9lives", "1", False) == "_9lives"
    assert render_prometheus(None) == ""

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    counter = provider.get_meter("t").create_counter("c", description="a\nb")
    counter.add(1, {"why": 'say "hi"\\\n', "flag": True})
    text = render_prometheus(reader.get_metrics_data())
    assert "# HELP c_total a\\nb" in text
    assert 'c_total{why="say \\"hi\\"\\\\\\n",flag="true"} 1' in text
    provider.shutdown()


async def test_spans_over_the_bounds_are_dropped_and_counted(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("otel:\n  max_spans_per_run: 3\n")
    steps = [{"tool": "add", "arguments": {"numbers": [n]}} for n in range(5)] + [{"text": "ok"}]
    workspace.scripted_agent("many", steps, tools=["add"])
    result = await t.kernel.run("many", "go")
    assert result.status == "completed"
    assert len(t.spans()) == 3  # the run and its first two calls
    assert (
        t.metric("soulacy.otel.spans.dropped", **{"soulacy.otel.reason": "max_spans_per_run"}) == 9
    )  # 11 calls, 2 traced
    assert t.metric("soulacy.model.calls") == 6  # metrics are kept whatever the bounds
    assert t.telemetry.observer.open_total == 0
    assert not t.telemetry.observer.runs


async def test_open_spans_are_bounded_per_run_and_in_total(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    import trio

    t = traced("otel:\n  max_open_spans: 2\n  max_open_spans_per_run: 1\n")
    workspace.scripted_agent("slow", [{"text": "done", "sleep": 0.1}], repeat=True)
    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(lambda n=n: t.kernel.run("slow", "hi", session_id=f"s{n}"))
    names = sorted(s.name for s in t.spans())
    # The total holds two open spans. How many runs get one depends on scheduling: when the
    # first run reaches its model call before the others start, its call takes the second
    # place; otherwise the second run's span does. Either way the third run is never traced.
    assert names.count("invoke_agent slow") in (1, 2)
    assert t.metric("soulacy.otel.spans.dropped", **{"soulacy.otel.reason": "max_open_spans"}) >= 2
    assert t.metric("soulacy.runs") == 3
    assert t.telemetry.observer.open_total == 0


async def test_unsampled_runs_make_no_spans_but_are_counted(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("otel:\n  sampling: 0\n")
    workspace.scripted_agent("adder", ADD, tools=["add"])
    await t.kernel.run("adder", "19 + 23?")
    assert t.spans() == []
    assert t.metric("soulacy.runs") == 1
    assert t.metric("soulacy.tool.calls") == 1
