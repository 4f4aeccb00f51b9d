"""Fixtures of the OpenTelemetry contrib plugin's tests: kernels whose spans go to the SDK's
in-memory exporter, and helpers to read the span tree and the metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import attrs
import pytest
import trio
from _support.openai_server import FakeOpenAI, serve_asgi
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics.export import MetricsData, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from soulacy.contrib.otel import Telemetry, start_telemetry
from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.providers import ProviderConfig, ProviderError, ProviderType
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


@attrs.frozen
class ReplyWithId(ModelReply):
    """A reply that says the provider's id of the response (``ModelReply`` has no such field
    yet; the plugin reads ``id`` when a reply has one)."""

    id: str | None = None


class Hosted:
    """A provider of a hosted API that is never called over the network: its class names its
    default endpoint, as the HTTP providers do (``default_base_url``), and its replies say the
    model that answered and their id."""

    name = "hosted"
    default_base_url = "https://models.example.com/v1"

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    async def complete(self, request: ModelRequest, on_text: Any = None) -> ModelReply:
        return ReplyWithId(
            Message("assistant", "hello"), Usage(12, 3), "stop", "hosted-model-0613", id="resp_42"
        )

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
            ProviderType("failing", lambda name, config, kernel: Failing()),
            ProviderType("hosted", lambda name, config, kernel: Hosted(config)),
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


@pytest.fixture
async def openai_server(nursery: trio.Nursery) -> AsyncIterator[FakeOpenAI]:
    """A Chat Completions server on 127.0.0.1 answering from ``server.answers``."""
    server = FakeOpenAI()
    url, shutdown = await serve_asgi(nursery, server.app)
    server.base_url = url + "/v1"
    yield server
    shutdown.set()


# -- a real OTLP/HTTP receiver on loopback ---------------------------------------------------------


@attrs.define
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    arrived: float = 0.0  # trio.current_time() when the request came in
    answered: float = 0.0  # … and when it was answered


@attrs.define
class Receiver:
    """A small OTLP/HTTP receiver: records each POST and answers 200 with an empty response,
    ``delay`` seconds after it came in (a collector far away, or busy)."""

    received: list[Received] = attrs.Factory(list)
    delay: float = 0.0

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        arrived = trio.current_time()
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        request = Received(scope["path"], headers, body, arrived)
        self.received.append(request)
        await trio.sleep(self.delay)
        request.answered = trio.current_time()
        answer = ExportTraceServiceResponse().SerializeToString()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/x-protobuf")],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    def spans(self) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
        """(name, attributes, resource attributes) of every span received."""
        found = []
        for request in self.received:
            if request.path != "/v1/traces":
                continue
            parsed = ExportTraceServiceRequest.FromString(request.body)
            for resource_spans in parsed.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append((span.name, _attributes(span.attributes), resource))
        return found

    def metric_names(self) -> set[str]:
        names = set()
        for request in self.received:
            if request.path == "/v1/metrics":
                parsed = ExportMetricsServiceRequest.FromString(request.body)
                for resource in parsed.resource_metrics:
                    for scope in resource.scope_metrics:
                        names.update(m.name for m in scope.metrics)
        return names


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        value = pair.value
        kind = value.WhichOneof("value")
        out[pair.key] = (
            [v.string_value for v in value.array_value.values]
            if kind == "array_value"
            else getattr(value, kind)
        )
    return out


async def serve(nursery: trio.Nursery, app: Any) -> tuple[str, trio.Event]:
    """Serve ``app`` on 127.0.0.1 (a free port): its URL, and the event that stops it."""
    return await serve_asgi(nursery, app)
