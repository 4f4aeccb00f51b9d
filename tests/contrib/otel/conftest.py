"""Fixtures of the OpenTelemetry contrib plugin's tests: kernels whose spans go to the SDK's
in-memory exporter, and helpers to read the span tree and the metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.metrics.export import MetricsData, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from soulacy.contrib.otel import Telemetry, start_telemetry
from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.providers import ProviderError, ProviderType
from soulacy.testing import Workspace, throwaway_plugin

PLUGIN = "soulacy.contrib.otel"
ENABLE = f"plugins:\n  enable: [{PLUGIN}]\n"
ADD = [  # a model that calls the add tool once, then answers
    {"tool": "add", "arguments": {"numbers": [19, 23]}, "id": "c1"},
    {"text": "19 + 23 = 42"},
]


def add(numbers: list[int]) -> int:
    """Add numbers."""
    return sum(numbers)


def fetch(city: str) -> dict[str, Any]:
    """Readings of a city."""
    return {"city": city, "readings": [12.5, 14.0]}


def long(part: int = 0) -> str:
    """A long result (2,400 characters): a few of them fill a small context window."""
    return f"part {part}: " + "lorem ipsum " * 200


def same(x: int = 0) -> str:
    """Always the same answer."""
    return "unchanged"


class Failing:
    """A provider whose every call fails, as an unreachable API does after its retries."""

    name = "failing"

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelReply:
        raise ProviderError("the model API answered 503 (api_key=sk-secretsecret)")

    def capacity(self, model: str | None) -> None:
        return None

    async def aclose(self) -> None:
        return None


def tools_plugin() -> Any:
    return throwaway_plugin(
        "test_tools",
        soulacy_tools=lambda kernel, agent_id: [
            Tool.from_function(add),
            Tool.from_function(fetch),
            Tool.from_function(long),
            Tool.from_function(same),
        ],
        soulacy_provider_types=lambda: [
            ProviderType("failing", lambda name, config, kernel: Failing())
        ],
    )


@attrs.define
class Traced:
    """A kernel with the plugin, its telemetry and the in-memory exporter its spans go to."""

    kernel: Kernel
    telemetry: Telemetry
    exporter: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        self.telemetry.force_flush()
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if (s.name or "").startswith(prefix)]

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def metric(self, name: str, **labels: Any) -> float:
        """The sum of the points of metric ``name`` whose attributes include ``labels``."""
        return metric_value(self.telemetry.metrics_data(), name, **labels)


def metric_value(data: MetricsData | None, name: str, **labels: Any) -> float:
    total = 0.0
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != name:
                    continue
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if all(attributes.get(k) == v for k, v in labels.items()):
                        if isinstance(point, NumberDataPoint):
                            total += point.value
                        else:  # a histogram: its count
                            total += point.count
    return total


def children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    found = [
        s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]
    return sorted(found, key=lambda s: s.start_time or 0)


def within(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.start_time
    assert child.end_time
    assert parent.start_time
    assert parent.end_time
    return parent.start_time <= child.start_time <= child.end_time <= parent.end_time


@pytest.fixture
async def traced(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> AsyncIterator[Callable[..., Traced]]:
    """``traced(config="", environ=None, batch=True)``: a kernel with the plugin enabled in
    config.yaml (plus ``config``) whose spans go to an in-memory exporter; metrics are read
    from the plugin's own reader (no other reader)."""
    kernels: list[Kernel] = []

    def make(config: str = "", environ: dict[str, str] | None = None, batch: bool = True) -> Traced:
        workspace.write_config(ENABLE + config)
        kernel = make_kernel(
            extra_plugins=[tools_plugin()], plugins=["no:sqlite_store"], environ=environ or {}
        )
        kernels.append(kernel)
        exporter = InMemorySpanExporter()
        telemetry = start_telemetry(
            kernel, span_exporters=[exporter], metric_readers=[], batch=batch
        )
        return Traced(kernel, telemetry, exporter)

    yield make
    for kernel in kernels:
        await kernel.aclose()
