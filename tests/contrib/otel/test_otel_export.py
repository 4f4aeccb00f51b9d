"""Over real loopback HTTP: an OTLP/HTTP receiver, a dead collector, and ``GET /metrics``."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

import httpx
import pytest
import trio
from conftest import ADD, ENABLE, Receiver, serve, tools_plugin

from soulacy.contrib.otel import telemetry
from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace


def free_port() -> int:
    """A loopback port with nothing listening on it (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_spans_and_metrics_reach_a_real_otlp_receiver(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    nursery: trio.Nursery,
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = Receiver()
    url, stop = await serve(nursery, receiver.app)
    workspace.write_config(
        ENABLE + f"otel:\n  endpoint: {url}\n  headers:\n    x-collector-token: tok-31415926\n"
    )
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
    caplog.set_level(logging.INFO, logger="soulacy.otel")
    result = await kernel.run("adder", "19 + 23?", run_id="R1")
    assert result.status == "completed"
    await kernel.aclose()  # flushes the batch processor and the metrics reader
    stop.set()
    traces = [r for r in receiver.received if r.path == "/v1/traces"]
    assert traces, receiver.received
    assert traces[0].headers["x-collector-token"] == "tok-31415926"
    assert traces[0].headers["content-type"] == "application/x-protobuf"
    spans = receiver.spans()
    assert sorted(name for name, _, _ in spans) == sorted(
        [
            "invoke_agent adder",
            "chat agents/adder/script.yaml",
            "execute_tool add",
            "chat agents/adder/script.yaml",
        ]
    )
    [run] = [attributes for name, attributes, _ in spans if name == "invoke_agent adder"]
    assert run["gen_ai.agent.id"] == "adder"
    assert run["soulacy.run.id"] == "R1"
    assert run["soulacy.run.status"] == "completed"
    [tool] = [attributes for name, attributes, _ in spans if name == "execute_tool add"]
    assert tool["gen_ai.tool.call.id"] == "c1"
    assert {resource["service.name"] for _, _, resource in spans} == {"soulacy"}
    assert {"soulacy.runs", "gen_ai.client.operation.duration"} <= receiver.metric_names()
    assert "tok-31415926" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


async def test_a_dead_collector_neither_fails_nor_slows_a_run(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Read by the SDK from the process environment: export every 10 ms while the run goes on,
    # and give up on an export after half a second of retries.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    turns = 40
    steps = [{"tool": "add", "arguments": {"numbers": [n]}} for n in range(turns)]
    workspace.scripted_agent("adder", [*steps, {"text": "done"}], tools=["add"])

    async def timed(config: str) -> tuple[Kernel, float]:
        workspace.write_config(config)
        kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
        started = time.perf_counter()
        result = await kernel.run("adder", "go")
        assert result.status == "completed"
        assert result.tool_calls == turns
        return kernel, time.perf_counter() - started

    plain, baseline = await timed("")
    await plain.aclose()
    dead = f"otel:\n  endpoint: http://127.0.0.1:{free_port()}\n  shutdown_timeout: 1s\n"
    caplog.set_level(logging.WARNING, logger="soulacy.otel")
    kernel, elapsed = await timed(ENABLE + dead)
    # Exports are attempted during the run, in the batch processor's thread: the run does not
    # wait for them (a blocking export would add its retries, a second or more).
    assert elapsed < baseline + 0.75, (elapsed, baseline)
    for _ in range(100):  # the warning comes from the exporter's thread, once it gives up
        if "could not export traces" in caplog.text:
            break
        await trio.sleep(0.05)
    assert "could not export traces to http://127.0.0.1:" in caplog.text
    assert "runs are not affected" in caplog.text
    assert telemetry(kernel).metrics.export_failures.get("traces") >= 1
    started = time.perf_counter()
    await kernel.aclose()
    assert time.perf_counter() - started < 1.0 + 1.0  # the shutdown timeout, and some slack
    # a second run in another kernel is not affected by the first one's dead collector
    again, _ = await timed(ENABLE + dead)
    await again.aclose()


async def test_metrics_are_served_in_the_prometheus_format_over_loopback(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(
        ENABLE + "server:\n  enabled: false\notel:\n  exporter: none\n  metrics_bind: 127.0.0.1:0\n"
    )
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
    async with open_kernel(kernel=kernel), httpx.AsyncClient() as client:
        [url] = kernel.started["otel-metrics"]
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/metrics")
        before = await client.get(url)
        assert before.status_code == 200
        assert before.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert "soulacy_runs_total" not in before.text
        await kernel.run("adder", "19 + 23?")
        after = await client.get(url)
        assert after.status_code == 200
        assert 'soulacy_runs_total{soulacy_agent_id="adder",' in after.text
        assert "# TYPE gen_ai_client_operation_duration_seconds histogram" in after.text
        head = await client.head(url)
        assert head.status_code == 200
        assert head.content == b""
        assert int(head.headers["content-length"]) > 0
        assert (await client.get(url.replace("/metrics", "/other"))).status_code == 404
        posted = await client.post(url)
        assert posted.status_code == 405
        assert posted.headers["allow"] == "GET, HEAD"
    with pytest.raises(httpx.ConnectError):  # stopped with the kernel
        async with httpx.AsyncClient() as client:
            await client.get(url)
