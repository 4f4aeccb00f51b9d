"""An incoming W3C ``traceparent`` is continued: the run's span is a child of the caller's span
in the caller's trace, from ``Kernel.run(trace=...)`` and over HTTP (the request's header)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from _support.http_server import KEYS
from conftest import ADD, Traced

from soulacy.kernel import open_kernel
from soulacy.testing import Workspace

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


async def test_a_run_given_a_traceparent_continues_the_callers_trace(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced()
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Adder")
    await t.kernel.run("adder", "19 + 23?", trace={"traceparent": TRACEPARENT})
    await t.kernel.run("adder", "19 + 23?")  # no caller: a trace of its own
    first, second = t.named("invoke_agent")
    assert f"{first.context.trace_id:032x}" == TRACE_ID
    assert first.parent is not None
    assert f"{first.parent.span_id:016x}" == CALLER_SPAN
    assert first.parent.is_remote
    assert second.parent is None
    assert f"{second.context.trace_id:032x}" != TRACE_ID
    for child in t.spans():  # the model and tool calls stay under the run
        if child is not first and child.context.trace_id == first.context.trace_id:
            assert child.parent is not None


async def test_a_chat_over_http_continues_the_trace_of_its_traceparent_header(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    keys = ", ".join(f"{p}: {k}" for p, k in KEYS.items())
    t = traced(f"server:\n  port: 0\n  api_keys: {{{keys}}}\n  shutdown_grace: 0s\n")
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Adder")
    async with open_kernel(kernel=t.kernel) as running:
        url = running.started["http"][0] + "/api/v1"
        headers = {"Authorization": "Bearer key-alice"}
        async with httpx.AsyncClient(base_url=url, headers=headers) as client:
            sent = {"agent_id": "adder", "text": "19 + 23?"}
            ok = await client.post("/chat", json=sent, headers={"traceparent": TRACEPARENT})
            assert ok.status_code == 200, ok.text
            bad = await client.post("/chat", json=sent, headers={"traceparent": "00-zz-yy-01"})
            assert bad.status_code == 200  # an invalid header is ignored, not refused
    continued, fresh = t.named("invoke_agent")
    assert f"{continued.context.trace_id:032x}" == TRACE_ID
    assert continued.parent is not None
    assert f"{continued.parent.span_id:016x}" == CALLER_SPAN
    assert fresh.parent is None


async def test_with_trust_inbound_trace_off_a_callers_traceparent_neither_places_nor_samples(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    # Every run sampled out by config: a caller's "-01" must not sample its run back in.
    t = traced("otel:\n  trust_inbound_trace: false\n  sampling: 0\n")
    workspace.scripted_agent("adder", ADD, tools=["add"], name="Adder")
    await t.kernel.run("adder", "19 + 23?", trace={"traceparent": TRACEPARENT})
    assert t.named("invoke_agent") == []
    t = traced("otel:\n  trust_inbound_trace: false\n")
    await t.kernel.run("adder", "19 + 23?", trace={"traceparent": TRACEPARENT})
    [run] = t.named("invoke_agent")
    assert run.parent is None  # a trace of its own, not the caller's
    assert f"{run.context.trace_id:032x}" != TRACE_ID


def test_trust_inbound_trace_is_of_the_trust_root_set_in_config_yaml_only() -> None:
    from soulacy.contrib.otel._config import TRUSTED

    assert "trust_inbound_trace" in TRUSTED  # an HTTP editor cannot make callers trusted
