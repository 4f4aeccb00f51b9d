"""The GenAI semantic conventions in full: which server a model call went to, which model
answered and with which response id, the token usage histogram, and the span names."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

from _support.openai_server import FakeOpenAI, text
from conftest import ADD, Traced
from opentelemetry.sdk.metrics.export import Metric

from soulacy.testing import Workspace

# The conventions' advised buckets of gen_ai.client.token.usage (powers of 4, 1 to 4^13).
TOKEN_BUCKETS = (
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
)
DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)


def local_openai(base_url: str) -> str:
    return (
        "llm:\n  providers:\n    local:\n      type: openai\n"
        f"      base_url: {base_url}\n      api_key: sk-test\n      model: fake-model\n"
        "      max_retries: 0\n"
    )


def metric(t: Traced, name: str) -> Metric:
    data = t.telemetry.metrics_data()
    assert data is not None
    found = [
        m
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for m in scope.metrics
        if m.name == name
    ]
    assert len(found) == 1, [m.name for m in found]
    return found[0]


def points(t: Traced, name: str) -> dict[Any, Any]:
    """The points of a histogram by their attributes (as a sorted tuple of pairs)."""
    return {
        tuple(sorted(dict(p.attributes or {}).items())): p for p in metric(t, name).data.data_points
    }


async def test_a_model_call_says_which_server_it_went_to_and_which_model_answered(
    traced: Callable[..., Traced], workspace: Workspace, openai_server: FakeOpenAI
) -> None:
    t = traced(local_openai(openai_server.base_url))
    workspace.write_agent("a", {"llm": {"provider": "local"}})
    answer = text("hello", prompt=10, completion=5)
    answer.body["model"] = "fake-model-0613"  # the model that answered, not the one asked for
    openai_server.answers.append(answer)
    result = await t.kernel.run("a", "hi")
    assert result.status == "completed", result.metadata()
    port = urllib.parse.urlsplit(openai_server.base_url).port
    chat = t.one("chat fake-model").attributes
    assert chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == "fake-model"
    assert chat["gen_ai.response.model"] == "fake-model-0613"
    assert (chat["server.address"], chat["server.port"]) == ("127.0.0.1", port)
    [(labels, point)] = points(t, "gen_ai.client.operation.duration").items()
    assert dict(labels) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "fake-model",
        "gen_ai.response.model": "fake-model-0613",
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert point.count == 1


async def test_a_provider_without_base_url_is_reached_at_its_default_endpoint(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("llm:\n  providers:\n    cloud:\n      type: hosted\n      model: hosted-model\n")
    workspace.write_agent("a", {"llm": {"provider": "cloud"}})
    await t.kernel.run("a", "hi")
    chat = t.one("chat hosted-model").attributes
    assert (chat["server.address"], chat["server.port"]) == ("models.example.com", 443)
    assert chat["gen_ai.response.model"] == "hosted-model-0613"


async def test_a_base_url_with_a_port_gives_that_port(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(
        "llm:\n  providers:\n    cloud:\n      type: hosted\n      model: hosted-model\n"
        "      base_url: http://user:secret@10.1.2.80:8080/v1\n"
    )
    workspace.write_agent("a", {"llm": {"provider": "cloud"}})
    await t.kernel.run("a", "hi")
    chat = t.one("chat hosted-model").attributes
    assert (chat["server.address"], chat["server.port"]) == ("10.1.2.80", 8080)
    assert all("secret" not in str(value) for value in chat.values())


async def test_a_response_id_is_recorded_when_the_reply_carries_one(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("llm:\n  providers:\n    cloud:\n      type: hosted\n      model: hosted-model\n")
    workspace.write_agent("a", {"llm": {"provider": "cloud"}})
    await t.kernel.run("a", "hi")
    assert t.one("chat hosted-model").attributes["gen_ai.response.id"] == "resp_42"


async def test_a_scripted_model_has_no_server_and_no_response_model(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("adder", ADD, tools=["add"])
    await t.kernel.run("adder", "19 + 23?")
    for chat in t.named("chat "):
        assert not {"server.address", "server.port", "gen_ai.response.model"} & set(
            chat.attributes or {}
        )


async def test_token_usage_is_a_histogram_with_the_conventions_buckets(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("llm:\n  providers:\n    cloud:\n      type: hosted\n      model: hosted-model\n")
    workspace.write_agent("a", {"llm": {"provider": "cloud"}})
    await t.kernel.run("a", "hi")
    await t.kernel.run("a", "again")
    usage = metric(t, "gen_ai.client.token.usage")
    assert usage.unit == "{token}"
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "hosted",
        "gen_ai.request.model": "hosted-model",
        "gen_ai.response.model": "hosted-model-0613",
        "server.address": "models.example.com",
        "server.port": 443,
    }
    found = points(t, "gen_ai.client.token.usage")
    assert {dict(labels)["gen_ai.token.type"] for labels in found} == {"input", "output"}
    for labels, point in found.items():
        kind = dict(labels)["gen_ai.token.type"]
        assert dict(labels) == {**common, "gen_ai.token.type": kind}
        assert tuple(point.explicit_bounds) == TOKEN_BUCKETS
        assert point.count == 2  # one value per call
        assert point.sum == {"input": 24, "output": 6}[kind]
    duration = metric(t, "gen_ai.client.operation.duration")
    assert duration.unit == "s"
    for point in duration.data.data_points:
        assert tuple(point.explicit_bounds) == DURATION_BUCKETS


async def test_token_usage_is_in_the_prometheus_text(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("llm:\n  providers:\n    cloud:\n      type: hosted\n      model: hosted-model\n")
    workspace.write_agent("a", {"llm": {"provider": "cloud"}})
    await t.kernel.run("a", "hi")
    text = t.telemetry.prometheus_text()
    assert "# TYPE gen_ai_client_token_usage histogram" in text
    assert "gen_ai_client_token_usage_bucket{" in text
    assert 'le="67108864"' in text


async def test_the_run_span_is_named_by_the_agent_name(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Math Tutor")
    workspace.scripted_agent("plain", [{"text": "ok"}])  # no name: its id names it
    await t.kernel.run("adder", "19 + 23?")
    await t.kernel.run("plain", "hi")
    run = t.one("invoke_agent Math Tutor")
    assert run.attributes["gen_ai.agent.name"] == "Math Tutor"
    assert run.attributes["gen_ai.agent.id"] == "adder"
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    plain = t.one("invoke_agent plain")
    assert plain.attributes["gen_ai.agent.name"] == "plain"
    # tool spans are named by the tool: execute_tool {gen_ai.tool.name}
    assert t.one("execute_tool add").attributes["gen_ai.tool.name"] == "add"
