"""A contrib plugin: OpenTelemetry traces and metrics of runs, off by default.

Enable it with ``soulacy -p soulacy.contrib.otel …`` or in config.yaml (it needs the ``otel``
extra: ``pip install 'soulacy[otel]'``)::

    plugins:
      enable: [soulacy.contrib.otel]
    otel:
      exporter: otlp                      # otlp | console | none; unset: OTEL_TRACES_EXPORTER
      endpoint: http://collector:4318     # unset: OTEL_EXPORTER_OTLP_ENDPOINT
      headers: {x-team: ...}              # values are never logged
      sampling: 0.25                      # unset: OTEL_TRACES_SAMPLER
      capture_content: false              # request, reply, tool arguments and results
      metrics_bind: 127.0.0.1:9464        # GET /metrics (Prometheus text); unset: off
      http_metrics: true                  # GET /metrics on the HTTP transport, admins only

It observes the kernel's event stream (``soulacy_event``): a span per run
(``invoke_agent {agent name}``), child spans per model call (``chat {model}``) and tool call
(``execute_tool {tool}``) with the GenAI semantic conventions, per workflow step and reasoning
step; and metrics of runs, calls, tokens (``gen_ai.client.token.usage``), cost, compactions and
durations (``gen_ai.client.operation.duration``) through the SDK's MeterProvider, served as
Prometheus text at ``GET /metrics`` on the HTTP transport (admins) and on ``metrics_bind``. A
run participant (``soulacy_run_participants``) reads what only a reply says: the model that
answered and the response's id. Written only against public APIs, as a third-party plugin
would be. See docs/observability.md.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any

try:
    import opentelemetry.sdk.trace  # noqa: F401  # the SDK, not only the API
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in development
    raise ImportError(
        "soulacy.contrib.otel needs the OpenTelemetry SDK: pip install 'soulacy[otel]'"
    ) from exc

from soulacy.kernel import (
    ConfigIssue,
    ConfigSection,
    Event,
    Kernel,
    Service,
    Settings,
    StashKey,
    hookimpl,
)
from soulacy.kernel.contracts import RunParticipant
from soulacy.kernel.engine import Run

from ._config import SECTION, TRUSTED, OtelConfig, Resolved, parse_bind, resolve, validate
from ._prometheus import CONTENT_TYPE
from ._prometheus import render as render_prometheus
from ._service import MetricsApp, MetricsService
from ._telemetry import Telemetry

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter

    from soulacy.plugins.http import HttpRequest, HttpResponse, HttpRoute

__all__ = [
    "MetricsApp",
    "MetricsService",
    "OtelConfig",
    "Resolved",
    "Telemetry",
    "render_prometheus",
    "start_telemetry",
    "telemetry",
]

log = logging.getLogger("soulacy.otel")
_key = StashKey[Telemetry]("otel telemetry")


def telemetry(kernel: Kernel) -> Telemetry:
    """The kernel's telemetry, made with the configured exporters on first use."""
    found = kernel.stash.get(_key, None)
    if found is None:
        found = start_telemetry(kernel)
    return found


def start_telemetry(
    kernel: Kernel,
    *,
    span_exporters: Sequence[SpanExporter] | None = None,
    metric_readers: Sequence[MetricReader] | None = None,
    batch: bool = True,
) -> Telemetry:
    """Make the kernel's telemetry now, optionally with other exporters than the configured
    ones (an in-memory exporter in a test; an application's own). Call it before the kernel's
    first run: after it, the kernel already has its telemetry (a ``RuntimeError``)."""
    if _key in kernel.stash:
        raise RuntimeError("this kernel's telemetry is made already (at its first run)")
    config: OtelConfig = kernel.config.section(SECTION)
    resolved = resolve(config, kernel.environ)
    # The SDK's exporters log every failed attempt; the plugin says it once on soulacy.otel.
    # Without a handler of the application's, Python would print them all to stderr.
    sdk_log = logging.getLogger("opentelemetry")
    if not any(isinstance(h, logging.NullHandler) for h in sdk_log.handlers):
        sdk_log.addHandler(logging.NullHandler())
    made = kernel.stash[_key] = Telemetry(
        kernel,
        config,
        resolved,
        span_exporters=span_exporters,
        metric_readers=metric_readers,
        batch=batch,
    )
    log.info("telemetry: %s", made.describe())
    return made


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [
        ConfigSection(SECTION, OtelConfig, doc="OpenTelemetry traces and metrics (contrib)"),
        *(ConfigSection.trust_root(f"{SECTION}.{key}", doc=why) for key, why in TRUSTED.items()),
    ]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    return validate(config)


@hookimpl
def soulacy_event(kernel: Kernel, event: Event) -> None:
    if event.run_id is None:
        return
    found = kernel.stash.get(_key, None)
    if found is None:
        if event.type not in ("run.started", "run.completed"):
            return  # a studio build's or a schedule's event before any run
        try:
            found = telemetry(kernel)
        except Exception:  # an exporter that cannot even be made: runs go on without
            log.warning("could not set up telemetry; runs are not traced", exc_info=True)
            return
    found.observe(event)


@hookimpl
def soulacy_run_participants(kernel: Kernel, run: Run) -> Sequence[RunParticipant] | None:
    """Takes part in the run's model calls when there is telemetry (made at ``run.started``,
    just before): what only a reply says goes on the call's span and metrics."""
    found = kernel.stash.get(_key, None)
    if found is None or not found.enabled or found.closed:
        return None
    return [found.participant]


@hookimpl(wrapper=True)
def soulacy_run_strategy(kernel: Kernel, run: Run) -> Generator[None, Any, Any]:
    """Sees which strategy drives the run (it does not answer): reasoning runs get a span per
    reasoning step, and every run says its strategy and model."""
    strategy = yield
    found = kernel.stash.get(_key, None)
    if found is not None and found.enabled and not found.closed:
        try:
            found.observer.strategy_chosen(run, strategy)
        except Exception:
            log.warning("could not record the strategy of run %s", run.run_id, exc_info=True)
    return strategy


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    config: OtelConfig = kernel.config.section(SECTION)
    if config.metrics_bind is None or parse_bind(config.metrics_bind) is None:
        return []
    return [MetricsService(kernel, config.metrics_bind, lambda: telemetry(kernel))]


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[HttpRoute]:
    """``GET /metrics`` on the HTTP transport's own port, for admins (``server.admins``, or
    keyless loopback mode's ``local``): the same text as ``otel.metrics_bind`` serves."""
    config: OtelConfig = kernel.config.section(SECTION)
    if not config.http_metrics:
        return []
    from soulacy.plugins.http import HttpError, HttpResponse, HttpRoute

    async def metrics(request: HttpRequest) -> HttpResponse:
        try:
            text = telemetry(kernel).prometheus_text()
        except Exception:
            log.warning("could not collect the metrics for GET /metrics", exc_info=True)
            raise HttpError(
                503, "the metrics could not be collected (see the server's log)"
            ) from None
        return HttpResponse(
            200, text.encode(), {"content-type": CONTENT_TYPE, "cache-control": "no-store"}
        )

    return [HttpRoute("GET", "/metrics", metrics, auth="admin", api=False)]


@hookimpl
async def soulacy_unconfigure(kernel: Kernel) -> None:
    found = kernel.stash.pop(_key, None)
    if found is not None:
        await found.aclose()
