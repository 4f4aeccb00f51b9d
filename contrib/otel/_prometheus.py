"""The SDK's collected metrics in the Prometheus text exposition format (version 0.0.4).

Names follow the OpenTelemetry-to-Prometheus compatibility rules: characters other than
letters, digits, ``_`` and ``:`` become ``_``; the unit is a suffix (``s`` → ``_seconds``,
``By`` → ``_bytes``, ``USD`` → ``_usd``; annotations such as ``{run}`` are dropped); monotonic
sums are counters ending in ``_total``; other sums and gauges are gauges; explicit-bucket
histograms give ``_bucket`` (cumulative, with ``le``), ``_sum`` and ``_count``. The resource's
attributes are the labels of one ``target_info`` gauge.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    MetricsData,
    NumberDataPoint,
    Sum,
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_UNITS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "By": "bytes", "USD": "usd"}
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_:]")
_LABEL_BAD = re.compile(r"[^a-zA-Z0-9_]")
_ANNOTATION = re.compile(r"\{[^}]*\}")


def metric_name(name: str, unit: str | None, counter: bool) -> str:
    base = _squash(_NAME_BAD.sub("_", name))
    suffix = _unit_suffix(unit or "")
    if suffix and not base.endswith("_" + suffix):
        base = f"{base}_{suffix}"
    if counter and not base.endswith("_total"):
        base += "_total"
    return "_" + base if base[:1].isdigit() else base


def _unit_suffix(unit: str) -> str:
    unit = _ANNOTATION.sub("", unit).strip()
    if not unit or unit == "1":
        return ""
    return _UNITS.get(unit) or _squash(_NAME_BAD.sub("_", unit)).strip("_").lower()


def _squash(text: str) -> str:
    return re.sub(r"__+", "_", text)


def label_name(name: str) -> str:
    label = _squash(_LABEL_BAD.sub("_", name))
    return "_" + label if label[:1].isdigit() else label


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(attributes: Mapping[str, Any] | None, extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = [(label_name(k), _label_value(v)) for k, v in (attributes or {}).items()]
    pairs += [(k, v) for k, v in extra]
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def _number(value: float | int) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def render(data: MetricsData | None) -> str:
    """The text of a ``/metrics`` answer (ends with a newline)."""
    families: dict[str, tuple[str, str, list[str]]] = {}  # name: (type, help, sample lines)
    resources: list[Mapping[str, Any]] = []

    def family(name: str, kind: str, description: str | None) -> list[str]:
        if name not in families:
            families[name] = (kind, description or "", [])
        return families[name][2]

    for resource_metrics in data.resource_metrics if data is not None else ():
        resources.append(resource_metrics.resource.attributes)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                points = metric.data
                if isinstance(points, Sum):
                    counter = points.is_monotonic
                    name = metric_name(metric.name, metric.unit, counter)
                    lines = family(name, "counter" if counter else "gauge", metric.description)
                    for point in points.data_points:
                        assert isinstance(point, NumberDataPoint)
                        lines.append(f"{name}{_labels(point.attributes)} {_number(point.value)}")
                elif isinstance(points, Gauge):
                    name = metric_name(metric.name, metric.unit, False)
                    lines = family(name, "gauge", metric.description)
                    for point in points.data_points:
                        lines.append(f"{name}{_labels(point.attributes)} {_number(point.value)}")
                elif isinstance(points, Histogram):
                    name = metric_name(metric.name, metric.unit, False)
                    lines = family(name, "histogram", metric.description)
                    for histogram in points.data_points:
                        lines.extend(_histogram(name, histogram))
                # exponential histograms: none of the plugin's instruments makes one
    out: list[str] = []
    if resources:
        out += ["# HELP target_info Target metadata", "# TYPE target_info gauge"]
        out += [f"target_info{_labels(attributes)} 1" for attributes in resources]
    for name, (kind, description, lines) in families.items():
        if description:
            out.append(f"# HELP {name} {_help(description)}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(lines)
    return "\n".join(out) + "\n" if out else ""


def _histogram(name: str, point: HistogramDataPoint) -> list[str]:
    lines = []
    total = 0
    for bound, count in zip(point.explicit_bounds, point.bucket_counts, strict=False):
        total += count
        lines.append(f"{name}_bucket{_labels(point.attributes, [('le', _number(bound))])} {total}")
    lines.append(f"{name}_bucket{_labels(point.attributes, [('le', '+Inf')])} {point.count}")
    lines.append(f"{name}_sum{_labels(point.attributes)} {_number(point.sum)}")
    lines.append(f"{name}_count{_labels(point.attributes)} {point.count}")
    return lines
