"""What exporting costs a short-lived process (``soulacy run``): the exporters are made off the
run's path, the last exports of traces and metrics go out together, and every span still
reaches the collector."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
from conftest import ADD, ENABLE, Receiver, serve, tools_plugin

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

SPANS_OF_ADD = sorted(
    [
        "invoke_agent adder",
        "chat agents/adder/script.yaml",
        "execute_tool add",
        "chat agents/adder/script.yaml",
    ]
)
TOOLS = '''
def add(numbers: list[int]) -> int:
    """Add numbers."""
    return sum(numbers)
'''


async def test_closing_sends_the_last_traces_and_metrics_at_once(
    workspace: Workspace, make_kernel: Callable[..., Kernel], nursery: trio.Nursery
) -> None:
    delay = 0.6  # a collector far away: each request takes this long to be answered
    receiver = Receiver(delay=delay)
    url, stop = await serve(nursery, receiver.app)
    workspace.write_config(ENABLE + f"otel:\n  endpoint: {url}\n")
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
    result = await kernel.run("adder", "19 + 23?")
    assert result.status == "completed"
    started = trio.current_time()
    await kernel.aclose()
    closing = trio.current_time() - started
    stop.set()
    [traces] = [r for r in receiver.received if r.path == "/v1/traces"]
    [metrics] = [r for r in receiver.received if r.path == "/v1/metrics"]
    # each was sent before the other was answered: closing waits for one round trip, not two
    assert metrics.arrived < traces.answered
    assert traces.arrived < metrics.answered
    assert closing < 2 * delay - 0.1, closing
    assert sorted(name for name, _, _ in receiver.spans()) == SPANS_OF_ADD


async def test_a_run_does_not_wait_for_its_exporters_to_be_made(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import opentelemetry.exporter.otlp.proto.http.trace_exporter as otlp

    release, made = threading.Event(), threading.Event()

    class SlowToMake(otlp.OTLPSpanExporter):
        """An exporter that takes long to make (the OTLP exporters import requests and
        protobuf: tens of milliseconds, more on a busy machine)."""

        def __init__(self, **options: Any) -> None:
            release.wait(3)
            super().__init__(**options)
            made.set()

    monkeypatch.setattr(otlp, "OTLPSpanExporter", SlowToMake)
    receiver = Receiver()
    url, stop = await serve(nursery, receiver.app)
    workspace.write_config(ENABLE + f"otel:\n  endpoint: {url}\n")
    workspace.scripted_agent("adder", ADD, tools=["add"])
    kernel = make_kernel(extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"])
    started = trio.current_time()
    result = await kernel.run("adder", "19 + 23?")
    assert result.status == "completed"
    assert trio.current_time() - started < 2.0
    assert not made.is_set(), "the run waited for its span exporter to be made"
    release.set()
    await kernel.aclose()  # the exporter is made, then the spans go out
    stop.set()
    assert made.is_set()
    assert sorted(name for name, _, _ in receiver.spans()) == SPANS_OF_ADD


async def test_a_cli_run_delivers_every_span_to_a_real_receiver(
    workspace: Workspace, nursery: trio.Nursery
) -> None:
    receiver = Receiver(delay=0.05)
    url, stop = await serve(nursery, receiver.app)
    workspace.write_config(ENABLE + f"otel:\n  endpoint: {url}\n")
    folder = workspace.scripted_agent("adder", ADD, tools=["tools.py:add"]).parent
    (folder / "tools.py").write_text(TOOLS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOULACY_", "OTEL_"))}
    done = await trio.run_process(
        [sys.executable, "-m", "soulacy.cli", "run", "adder", "19 + 23?"],
        cwd=workspace.path,
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    stop.set()
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output
    assert "19 + 23 = 42" in output
    assert "WARNING" not in output, output
    assert sorted(name for name, _, _ in receiver.spans()) == SPANS_OF_ADD
    assert {"soulacy.runs", "gen_ai.client.operation.duration"} <= receiver.metric_names()
