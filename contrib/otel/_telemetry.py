"""One kernel's telemetry: its tracer and meter providers, exporters, and their shutdown.

Nothing here is global: each kernel gets its own providers (the process's global providers,
which an application may have set, are left alone), made at the first run, not at load time,
so that a command that runs nothing starts no exporter thread.

Exporting never blocks a run: spans go through the SDK's ``BatchSpanProcessor``, whose worker
thread exports, and OTLP metrics through a ``PeriodicExportingMetricReader`` thread. An export
that fails (a collector that is down or refuses) is said once as a warning on the
``soulacy.otel`` logger, then at most once a minute while it goes on, and counted in
``soulacy.otel.exports.failed``; the run never sees it. Closing waits at most
``otel.shutdown_timeout`` for the last exports, then gives up on them, saying so.

What a short-lived process (``soulacy run``) pays for exporting is kept off its path:

* the OTLP exporters are made in a thread of their own (:class:`Later`): they import requests,
  urllib3 and the protobuf encoders, some 60 ms, which the first run need not wait for (the
  exporter's thread waits for them at its first export instead);
* closing sends the last batch of spans and the last metrics at once, each provider shut down
  in its own thread: a close waits for one round trip to the collector, not one per signal.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, Generic, TypeVar

import trio
from opentelemetry.metrics import NoOpMeter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import Tracer

from soulacy.kernel import Event, Kernel, redact_text
from soulacy.kernel.contracts import RunParticipant
from soulacy.kernel.engine import Run
from soulacy.kernel.messages import ModelReply

from . import _names as n
from ._config import OtelConfig, Resolved, describe_headers, names
from ._metrics import Metrics, Sums
from ._observer import Observer
from ._prometheus import render

log = logging.getLogger("soulacy.otel")
SCOPE = "soulacy"
WARN_EVERY = 60.0  # seconds between warnings of a failure that goes on
# The SDK's variables that change what an OTLP metric exporter asks of its reader: with one set,
# the exporter is made at once (its reader must know what it prefers).
METRIC_PREFERENCES = (
    "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE",
    "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
)
T = TypeVar("T")


def _version() -> str:
    try:
        return metadata.version("soulacy")
    except metadata.PackageNotFoundError:  # a source tree that is not installed
        return "0"


class Health:
    """Whether an exporter delivers: warns when it starts failing, then at most once a minute,
    and once when it delivers again."""

    def __init__(self, signal: str, target: str, failures: Sums) -> None:
        self.signal = signal
        self.target = target
        self.failures_by_signal = failures
        self.failing = False
        self.failures = 0  # batches lost since the last warning
        self.warned = 0.0
        self.lock = threading.Lock()  # exporters run in their own threads

    def report(self, ok: bool) -> None:
        with self.lock:
            if ok:
                if self.failing:
                    self.failing = False
                    log.warning("%s export to %s works again", self.signal, self.target)
                return
            self.failures_by_signal.add((self.signal,))
            self.failures += 1
            now = time.monotonic()
            if not self.failing or now - self.warned >= WARN_EVERY:
                log.warning(
                    "could not export %s to %s (%d batch(es) lost; is the collector up?);"
                    " runs are not affected",
                    self.signal,
                    self.target,
                    self.failures,
                )
                self.failing, self.warned, self.failures = True, now, 0


class Later(Generic[T]):
    """Something made in a thread of its own, and waited for where it is first needed."""

    def __init__(self, make: Callable[[], T], name: str) -> None:
        self._made = threading.Event()
        self._value: T | None = None
        worker = threading.Thread(target=self._make, args=(make,), name=name, daemon=True)
        worker.start()

    def _make(self, make: Callable[[], T]) -> None:
        try:
            self._value = make()
        except Exception:
            log.warning("could not make an exporter: nothing is exported by it", exc_info=True)
        finally:
            self._made.set()

    def get(self) -> T | None:
        """The thing, once made (None if making it failed)."""
        self._made.wait()
        return self._value

    def made(self) -> T | None:
        """The thing if it is made already, without waiting."""
        return self._value if self._made.is_set() else None


class GuardedSpanExporter(SpanExporter):
    """An exporter that never raises into the SDK and reports how its exports go; ``inner``
    may be made :class:`Later` (the batch processor's thread waits for it)."""

    def __init__(self, inner: SpanExporter | Later[SpanExporter], health: Health) -> None:
        self.inner = inner
        self.health = health
        self.closed = False

    def _exporter(self, wait: bool) -> SpanExporter | None:
        inner = self.inner
        if isinstance(inner, Later):
            return inner.get() if wait else inner.made()
        return inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        inner = self._exporter(wait=True)
        try:
            result = inner.export(spans) if inner is not None else SpanExportResult.FAILURE
        except Exception:  # an exporter bug must not reach the worker thread's loop
            log.warning("the %s exporter failed", self.health.signal, exc_info=True)
            result = SpanExportResult.FAILURE
        self.health.report(result is SpanExportResult.SUCCESS)
        return result

    def shutdown(self) -> None:
        if not self.closed:
            self.closed = True
            inner = self._exporter(wait=False)  # not made yet: it never exported, nothing to do
            if inner is not None:
                inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        inner = self._exporter(wait=False)
        return inner.force_flush(timeout_millis) if inner is not None else True


class GuardedMetricExporter(MetricExporter):
    """The same for a metric exporter. Its reader reads its temporality and aggregation when
    it is made: an exporter made :class:`Later` is given the SDK's defaults (the OTLP
    exporter's too, unless ``OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`` or
    ``…_DEFAULT_HISTOGRAM_AGGREGATION`` say otherwise: then it is made at once)."""

    def __init__(self, inner: MetricExporter | Later[MetricExporter], health: Health) -> None:
        if isinstance(inner, Later):
            super().__init__()
        else:
            super().__init__(inner._preferred_temporality, inner._preferred_aggregation)
        self.inner = inner
        self.health = health
        self.closed = False

    def _exporter(self, wait: bool) -> MetricExporter | None:
        inner = self.inner
        if isinstance(inner, Later):
            return inner.get() if wait else inner.made()
        return inner

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        inner = self._exporter(wait=True)
        try:
            result = (
                inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
                if inner is not None
                else MetricExportResult.FAILURE
            )
        except Exception:
            log.warning("the %s exporter failed", self.health.signal, exc_info=True)
            result = MetricExportResult.FAILURE
        self.health.report(result is MetricExportResult.SUCCESS)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        inner = self._exporter(wait=False)
        return inner.force_flush(timeout_millis) if inner is not None else True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        if not self.closed:
            self.closed = True
            inner = self._exporter(wait=False)
            if inner is not None:
                inner.shutdown(timeout_millis=timeout_millis, **kwargs)


class ReplyReader(RunParticipant):
    """The plugin's part in each run (``soulacy_run_participants``): after each model call it
    hands over what only the reply says (the model that answered, the response's id), which
    the call's events do not carry."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def after_model_call(
        self, run: Run, reply: ModelReply, provider: str, model: str | None
    ) -> None:
        self.telemetry.replied(run.run_id, reply)


def sampler_of(text: str) -> Sampler:
    """``ratio:R`` (config.yaml: parent-based, by trace id) or an ``OTEL_TRACES_SAMPLER``."""
    name, _, argument = text.partition(":")
    if name == "ratio":
        ratio = float(argument)
        root: Sampler = (
            ALWAYS_ON if ratio >= 1.0 else ALWAYS_OFF if ratio <= 0.0 else TraceIdRatioBased(ratio)
        )
        return ParentBased(root)
    ratio = float(argument or 1.0)
    base = name.removeprefix("parentbased_")
    root = {"always_on": ALWAYS_ON, "always_off": ALWAYS_OFF}.get(base) or TraceIdRatioBased(ratio)
    return ParentBased(root) if name.startswith("parentbased_") else root


class Telemetry:
    """One kernel's providers, exporters and event observer.

    ``span_exporters`` and ``metric_readers`` replace the configured exporters (an in-memory
    exporter in tests, an application's own); ``batch=False`` exports each span as it ends
    (``SimpleSpanProcessor``: for tests, never for a server). The ``/metrics`` reader is
    always there.
    """

    def __init__(
        self,
        kernel: Kernel,
        config: OtelConfig,
        resolved: Resolved,
        *,
        span_exporters: Sequence[SpanExporter] | None = None,
        metric_readers: Sequence[MetricReader] | None = None,
        batch: bool = True,
    ) -> None:
        self.config = config
        self.resolved = resolved
        self.enabled = not resolved.disabled
        self.closed = False
        self._problems = 0.0  # when the observer last said it failed
        for warning in resolved.warnings:
            log.warning("%s", warning)
        attributes: dict[str, str] = {
            **resolved.resource_attributes,
            "service.name": resolved.service_name,
            "service.version": _version(),
        }
        self.resource = Resource.create(attributes)
        self.export_failures = Sums((n.SIGNAL,))  # counted by the exporters' threads
        self.guarded: list[GuardedSpanExporter | GuardedMetricExporter] = []
        self.prometheus = InMemoryMetricReader()
        self.meter_provider: MeterProvider | None = None
        self.tracer_provider: TracerProvider | None = None
        self.processors: list[SpanProcessor] = []
        if not self.enabled:  # OTEL_SDK_DISABLED: the SDK's no-op instruments, no spans
            self.metrics = Metrics(NoOpMeter(SCOPE), self.export_failures)
            self.observer = Observer(kernel, config, self.metrics, None)
            self.participant = ReplyReader(self)
            return
        readers: list[MetricReader] = [self.prometheus]
        readers += (
            list(metric_readers) if metric_readers is not None else self._metric_readers(resolved)
        )
        self.meter_provider = MeterProvider(
            metric_readers=readers, resource=self.resource, shutdown_on_exit=False
        )
        self.metrics = Metrics(
            self.meter_provider.get_meter(SCOPE, _version()), self.export_failures
        )
        exporters = (
            list(span_exporters) if span_exporters is not None else self._span_exporters(resolved)
        )
        tracer: Tracer | None = None
        if exporters:  # no exporter: no span is made at all
            self.tracer_provider = TracerProvider(
                sampler=sampler_of(resolved.sampling),
                resource=self.resource,
                shutdown_on_exit=False,
            )
            for exporter in exporters:
                processor: SpanProcessor = (
                    BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
                )
                self.tracer_provider.add_span_processor(processor)
                self.processors.append(processor)
            tracer = self.tracer_provider.get_tracer(SCOPE, _version())
        self.observer = Observer(kernel, config, self.metrics, tracer)
        self.participant = ReplyReader(self)
        # A kernel that is never closed (``soulacy run`` exits without kernel.aclose()) still
        # flushes at interpreter exit, within the same bound.
        atexit.register(self._at_exit)

    # -- exporters -----------------------------------------------------------------------------

    def _span_exporters(self, resolved: Resolved) -> list[SpanExporter]:
        found: list[SpanExporter] = []
        for name in resolved.traces:
            if name == "otlp":
                target = redact_text(resolved.traces_endpoint)
                inner = Later(
                    lambda: _otlp_span_exporter(resolved), name="soulacy-otel-make-traces"
                )
                guarded = GuardedSpanExporter(inner, Health("traces", target, self.export_failures))
                log.info(
                    "traces: OTLP/HTTP to %s (headers: %s; sampling %s)",
                    target,
                    describe_headers(resolved.traces_headers),
                    resolved.sampling,
                )
            else:
                guarded = GuardedSpanExporter(
                    ConsoleSpanExporter(out=sys.stderr),
                    Health("traces", "stderr", self.export_failures),
                )
            self.guarded.append(guarded)
            found.append(guarded)
        return found

    def _metric_readers(self, resolved: Resolved) -> list[MetricReader]:
        found: list[MetricReader] = []
        for name in resolved.metrics:
            inner: MetricExporter | Later[MetricExporter]
            if name == "otlp":
                target = redact_text(resolved.metrics_endpoint)
                if any(os.environ.get(variable) for variable in METRIC_PREFERENCES):
                    inner = _otlp_metric_exporter(resolved)
                else:
                    inner = Later(
                        lambda: _otlp_metric_exporter(resolved), name="soulacy-otel-make-metrics"
                    )
                log.info(
                    "metrics: OTLP/HTTP to %s (headers: %s)",
                    target,
                    describe_headers(resolved.metrics_headers),
                )
            else:
                target, inner = "stderr", ConsoleMetricExporter(out=sys.stderr)
            guarded = GuardedMetricExporter(inner, Health("metrics", target, self.export_failures))
            self.guarded.append(guarded)
            found.append(
                PeriodicExportingMetricReader(
                    guarded, export_interval_millis=resolved.metric_export_interval_ms
                )
            )
        return found

    # -- what the plugin calls -----------------------------------------------------------------

    def observe(self, event: Event) -> None:
        if self.closed or not self.enabled:
            return
        try:
            self.observer.observe(event)
        except Exception:  # telemetry never fails a run: said, and the event is skipped
            now = time.monotonic()
            if now - self._problems >= WARN_EVERY:
                self._problems = now
                log.warning("could not record event %s", event.type, exc_info=True)

    def replied(self, run_id: str, reply: ModelReply) -> None:
        """What a model call of a run returned, before its ``llm.result`` (the participant's)."""
        if self.closed or not self.enabled:
            return
        try:
            self.observer.replied(run_id, reply)
        except Exception:  # never fails the run: a participant that raises would
            now = time.monotonic()
            if now - self._problems >= WARN_EVERY:
                self._problems = now
                log.warning("could not record the reply of run %s", run_id, exc_info=True)

    def metrics_data(self) -> MetricsData | None:
        """What the ``/metrics`` reader collects now (cumulative); None when disabled."""
        return self.prometheus.get_metrics_data() if self.meter_provider is not None else None

    def prometheus_text(self) -> str:
        return render(self.metrics_data())

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export what is buffered now (blocking: tests and benchmarks)."""
        ok = True
        if self.tracer_provider is not None:
            ok = self.tracer_provider.force_flush(timeout_millis)
        return ok

    def describe(self) -> str:
        resolved = self.resolved
        if resolved.disabled:
            return "disabled (OTEL_SDK_DISABLED)"
        return (
            f"traces: {names(resolved.traces)}, metrics: {names(resolved.metrics)},"
            f" sampling {resolved.sampling}, service {resolved.service_name}"
        )

    async def aclose(self) -> None:
        """End open spans, then flush and shut down within ``otel.shutdown_timeout``."""
        if self._closing():
            return
        timeout = float(self.config.shutdown_timeout.seconds)
        with trio.move_on_after(timeout) as scope:
            await trio.to_thread.run_sync(self._shutdown, abandon_on_cancel=True)
        if scope.cancelled_caught:
            self._gave_up(timeout)

    def _closing(self) -> bool:
        """Start closing; True when it was closed already."""
        atexit.unregister(self._at_exit)
        if self.closed:
            return True
        self.observer.close()
        self.closed = True
        for exporter in self.guarded:
            if exporter.health.failing:  # its retries would only wait: stop them now
                _quietly(exporter.shutdown)
        return False

    def _gave_up(self, timeout: float) -> None:
        for exporter in self.guarded:  # stops their retries: the threads end on their own
            _quietly(exporter.shutdown)
        log.warning(
            "telemetry was not flushed within %ss (is the collector up?): what was not"
            " exported yet is lost",
            timeout,
        )

    def _at_exit(self) -> None:
        if self._closing():
            return
        timeout = float(self.config.shutdown_timeout.seconds)
        worker = threading.Thread(target=self._shutdown, name="soulacy-otel-exit", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            self._gave_up(timeout)

    def _shutdown(self) -> None:
        """Shut the providers down at once, each sending its last batch: a close waits for
        one round trip to the collector, not one per signal."""
        closing = [
            provider.shutdown
            for provider in (self.tracer_provider, self.meter_provider)
            if provider is not None
        ]
        others = [
            threading.Thread(target=_quietly, args=(close,), name="soulacy-otel-close", daemon=True)
            for close in closing[1:]
        ]
        for other in others:
            other.start()
        if closing:
            _quietly(closing[0])
        for other in others:
            other.join()


def _otlp_span_exporter(resolved: Resolved) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(
        endpoint=resolved.traces_endpoint, headers=dict(resolved.traces_headers)
    )


def _otlp_metric_exporter(resolved: Resolved) -> MetricExporter:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(
        endpoint=resolved.metrics_endpoint, headers=dict(resolved.metrics_headers)
    )


def _quietly(close: Any) -> None:
    try:
        close()
    except Exception:
        log.warning("closing telemetry failed", exc_info=True)
