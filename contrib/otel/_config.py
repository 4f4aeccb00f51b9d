"""The ``otel:`` section of config.yaml, its checks, and how it combines with ``OTEL_*``.

Precedence, for every setting the plugin resolves itself: a key set in config.yaml (or by its
``SOULACY_OTEL__KEY`` override) wins over the standard ``OTEL_*`` variable, which wins over the
plugin's default. The variables are read from the kernel's environment (``kernel.environ``: the
process environment, unless the kernel was loaded with another). What the plugin does not
resolve (export timeouts, compression, certificates, the batch processor's sizes) is left to
the SDK, which reads those variables from the process environment itself.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping, Sequence

import attrs

from soulacy.kernel import ConfigIssue, Duration, Location, Settings

SECTION = "otel"
EXPORTERS = ("otlp", "console", "none")
DEFAULT_ENDPOINT = "http://localhost:4318"
DEFAULT_SERVICE_NAME = "soulacy"
# The section's trust root (docs/security.md): where spans and metrics go, what they carry,
# where /metrics listens. Spans name every principal's runs and sessions; with content, their
# text. Set in config.yaml (or the OTEL_* variables), never over HTTP.
TRUSTED = {
    "exporter": "where spans and metrics of every principal's runs go",
    "endpoint": "where spans and metrics of every principal's runs go",
    "headers": "the credentials sent with every export",
    "capture_content": "every principal's requests, replies and tool data on spans",
    "metrics_bind": "an address /metrics listens on, without keys",
    "trust_inbound_trace": "whether callers' traceparent headers place and sample their runs",
}
_BIND = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(?P<port>\d{1,5})$")


@attrs.frozen
class OtelConfig:
    """Where traces and metrics go, what spans may carry, and the bounds of the span work.

    ``exporter`` ``otlp`` (OTLP over HTTP/protobuf), ``console`` (stderr) or ``none``, for
    traces and metrics; ``endpoint`` the collector's base URL (``/v1/traces`` and
    ``/v1/metrics`` are appended); ``headers`` sent with every export (values are secrets:
    never logged); ``sampling`` the ratio of runs traced (their children follow them);
    ``capture_content`` records the request, the reply, tool arguments and results on spans
    (off: they may be private); ``metrics_bind`` serves ``/metrics`` in the Prometheus text
    format on ``host:port`` (off when unset); ``http_metrics`` also serves it on the HTTP
    transport, to admins only; ``trust_inbound_trace`` continues the trace a request names
    (its W3C ``traceparent``: the run's span a child of the caller's, sampled as the caller
    says), where false makes every run a trace of its own, sampled by ``sampling`` (for
    callers that are not this operator's own services). Unset keys fall back to the
    ``OTEL_*`` variables.
    """

    exporter: str | None = None
    endpoint: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    sampling: float | None = None
    service_name: str | None = None
    capture_content: bool = False
    max_content_chars: int = 4096
    metrics_bind: str | None = None
    http_metrics: bool = True
    trust_inbound_trace: bool = True
    max_open_spans: int = 4096
    max_open_spans_per_run: int = 256
    max_spans_per_run: int = 10_000
    shutdown_timeout: Duration = Duration(3)


def exporters_of(text: str) -> tuple[str, ...]:
    """``"otlp,console"`` as ``("otlp", "console")``; ``none`` alone is the empty tuple."""
    names = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    return tuple(name for name in names if name != "none")


def parse_bind(text: str) -> tuple[str, int] | None:
    """``host:port`` (``[::1]:9464`` for IPv6) as ``(host, port)``; None when malformed."""
    match = _BIND.match(text.strip())
    if match is None:
        return None
    port = int(match["port"])
    if port > 65535:
        return None
    return match["host"], port


def validate(config: Settings) -> list[ConfigIssue]:
    """Range and format checks of the section, each pointing at the line that sets it."""
    section: OtelConfig = config.section(SECTION)
    issues: list[ConfigIssue] = []

    def issue(key: str, message: str, value: object) -> None:
        path = f"{SECTION}.{key}"
        where = config.source_of(path) or Location(str(config.file))
        issues.append(ConfigIssue(where, path, message, value, True))

    if section.exporter is not None:
        names = [p.strip().lower() for p in section.exporter.split(",") if p.strip()]
        unknown = [n for n in names if n not in EXPORTERS]
        if not names or unknown:
            issue("exporter", f"expected one of {', '.join(EXPORTERS)}", section.exporter)
    if section.endpoint is not None:
        url = urllib.parse.urlsplit(section.endpoint)
        if url.scheme not in ("http", "https") or not url.netloc:
            # The value may carry a password in its userinfo: it is not repeated.
            issue("endpoint", "expected an http:// or https:// URL", "<not shown>")
    if section.sampling is not None and not 0.0 <= section.sampling <= 1.0:
        issue("sampling", "expected a ratio from 0 to 1", section.sampling)
    if section.metrics_bind is not None and parse_bind(section.metrics_bind) is None:
        issue("metrics_bind", "expected host:port (port 0 to 65535)", section.metrics_bind)
    for key in ("max_open_spans", "max_open_spans_per_run", "max_spans_per_run"):
        value = getattr(section, key)
        if value < 1:
            issue(key, "expected 1 or more", value)
    if section.max_content_chars < 0:
        issue("max_content_chars", "expected 0 or more", section.max_content_chars)
    if section.shutdown_timeout.is_zero:
        issue(
            "shutdown_timeout", "expected a duration greater than 0", str(section.shutdown_timeout)
        )
    for name in section.headers:
        if not name.strip() or any(c in name for c in "\r\n:"):
            issue(f"headers.{name}", "expected an HTTP header name", name)
    return issues


@attrs.frozen
class Resolved:
    """The settings in force once config.yaml and the ``OTEL_*`` variables are combined."""

    disabled: bool  # OTEL_SDK_DISABLED=true: no telemetry at all
    traces: tuple[str, ...]  # exporters of spans
    metrics: tuple[str, ...]  # exporters of metrics (besides /metrics)
    traces_endpoint: str
    metrics_endpoint: str
    traces_headers: Mapping[str, str] = attrs.field(repr=False)
    metrics_headers: Mapping[str, str] = attrs.field(repr=False)
    sampling: str  # "ratio:0.25", or an OTEL_TRACES_SAMPLER name (with its argument)
    service_name: str
    resource_attributes: Mapping[str, str]
    metric_export_interval_ms: float | None
    warnings: tuple[str, ...] = ()  # what the environment said that could not be used


SAMPLERS = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


def resolve(config: OtelConfig, environ: Mapping[str, str]) -> Resolved:
    """Combine the section with the standard variables (config.yaml first, then ``OTEL_*``)."""
    from opentelemetry.util.re import parse_env_headers

    warnings: list[str] = []

    def env(name: str) -> str | None:
        value = environ.get(name, "").strip()
        return value or None

    def exporters(variable: str) -> tuple[str, ...]:
        if config.exporter is not None:
            return exporters_of(config.exporter)
        text = env(variable)
        if text is None:
            return ("otlp",)
        names = exporters_of(text)
        known = tuple(n for n in names if n in EXPORTERS)
        if known != names:
            unknown = ", ".join(n for n in names if n not in EXPORTERS)
            warnings.append(f"{variable}: unknown exporter(s) {unknown} ignored")
        return known

    def endpoint(signal: str) -> str:
        if config.endpoint is not None:
            return f"{config.endpoint.rstrip('/')}/v1/{signal}"
        full = env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        if full is not None:
            return full
        base = env("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        return f"{base.rstrip('/')}/v1/{signal}"

    def headers(signal: str) -> dict[str, str]:
        text = env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS") or env(
            "OTEL_EXPORTER_OTLP_HEADERS"
        )
        found = {k.lower(): v for k, v in parse_env_headers(text or "", liberal=True).items()}
        found.update({k.strip().lower(): v for k, v in config.headers.items()})
        return found

    if config.sampling is not None:
        sampling = f"ratio:{config.sampling}"
    else:
        name = (env("OTEL_TRACES_SAMPLER") or "parentbased_always_on").lower()
        if name not in SAMPLERS:
            warnings.append(f"OTEL_TRACES_SAMPLER: unknown sampler {name!r}; tracing every run")
            name = "parentbased_always_on"
        if name.endswith("traceidratio"):
            argument = env("OTEL_TRACES_SAMPLER_ARG") or "1.0"
            try:
                ratio = float(argument)
            except ValueError:
                warnings.append(f"OTEL_TRACES_SAMPLER_ARG: not a number ({argument!r}); using 1.0")
                ratio = 1.0
            if not 0.0 <= ratio <= 1.0:
                warnings.append(f"OTEL_TRACES_SAMPLER_ARG: {ratio} is not from 0 to 1; using 1.0")
                ratio = 1.0
            name = f"{name}:{ratio}"
        sampling = name

    resource: dict[str, str] = {}
    for item in (env("OTEL_RESOURCE_ATTRIBUTES") or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            resource[key.strip()] = urllib.parse.unquote(value.strip())
    service = (
        config.service_name
        or env("OTEL_SERVICE_NAME")
        or resource.get("service.name")
        or DEFAULT_SERVICE_NAME
    )
    interval: float | None = None
    raw = env("OTEL_METRIC_EXPORT_INTERVAL")
    if raw is not None:
        try:
            interval = float(raw)
            if interval <= 0:
                raise ValueError(raw)
        except ValueError:
            warnings.append(f"OTEL_METRIC_EXPORT_INTERVAL: not a positive number ({raw!r})")
            interval = None
    disabled = (env("OTEL_SDK_DISABLED") or "").lower() == "true"
    return Resolved(
        disabled=disabled,
        traces=exporters("OTEL_TRACES_EXPORTER"),
        metrics=exporters("OTEL_METRICS_EXPORTER"),
        traces_endpoint=endpoint("traces"),
        metrics_endpoint=endpoint("metrics"),
        traces_headers=headers("traces"),
        metrics_headers=headers("metrics"),
        sampling=sampling,
        service_name=service,
        resource_attributes=resource,
        metric_export_interval_ms=interval,
        warnings=tuple(warnings),
    )


def describe_headers(headers: Mapping[str, str]) -> str:
    """Header names with every value masked: what a log line may say about them."""
    return ", ".join(f"{name}=***" for name in sorted(headers)) or "none"


def names(values: Sequence[str]) -> str:
    return ", ".join(values) or "none"
