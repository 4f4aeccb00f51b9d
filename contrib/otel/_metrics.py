"""The plugin's instruments, on the SDK's MeterProvider.

Counters are kept as plain cumulative sums by label values and reported through the SDK's
observable instruments: the SDK asks for them only when a reader collects (the OTLP reader's
interval, a ``/metrics`` request), so counting costs a run a dictionary update, not a trip
through the SDK's measurement pipeline (about 17 µs each, measured). Durations are
histograms, recorded through the SDK as they happen: there is no observable histogram. The
two GenAI histograms (``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``)
have the attributes and the bucket boundaries the GenAI semantic conventions give them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from . import _names as n

# The buckets the GenAI conventions advise for gen_ai.client.operation.duration, in seconds.
DURATION_BUCKETS: Final = (
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
# The buckets the GenAI conventions advise for gen_ai.client.token.usage: powers of 4, to 4^13.
TOKEN_BUCKETS: Final = (
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
RUN_BUCKETS: Final = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
MAX_SERIES: Final = 1000  # label combinations per counter; more are counted as an overflow
OVERFLOW: Final = {"otel.metric.overflow": True}


class Sums:
    """Cumulative sums by label values, observed by the SDK when a reader collects."""

    def __init__(self, labels: Sequence[str], max_series: int = MAX_SERIES) -> None:
        self.labels = tuple(labels)
        self.values: dict[tuple[str, ...], float] = {}
        self.overflow = 0.0
        self.max_series = max_series

    def add(self, key: tuple[str, ...], value: float = 1) -> None:
        values = self.values
        if key in values:
            values[key] += value
        elif len(values) < self.max_series:
            values[key] = value
        else:  # a label taking unbounded values (a free-text cancel reason) stays bounded
            self.overflow += value

    def get(self, *key: str) -> float:
        return self.values.get(key, 0.0)

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        labels = self.labels
        # dict.copy() runs in C under the GIL: a collection in an exporter's thread never sees
        # the dictionary change size while the Trio thread counts
        found = [
            Observation(v, dict(zip(labels, k, strict=True))) for k, v in self.values.copy().items()
        ]
        if self.overflow:
            found.append(Observation(self.overflow, OVERFLOW))
        return found


class Metrics:
    """Every instrument, and the sums behind the counters."""

    def __init__(self, meter: Meter, export_failures: Sums) -> None:
        self.runs = Sums((n.AGENT, n.STATUS, n.REASON, n.VERIFICATION))
        self.active = Sums((n.AGENT,))
        self.model_calls = Sums((n.AGENT, n.PROVIDER, n.REQUEST_MODEL))
        self.tokens = Sums((n.AGENT, n.PROVIDER, n.REQUEST_MODEL, n.TOKEN_TYPE))
        self.cost = Sums((n.AGENT,))
        self.tool_calls = Sums((n.AGENT, n.TOOL_NAME, n.TOOL_OUTCOME))
        self.progress_stops = Sums((n.AGENT, n.PROGRESS_KIND))
        self.verdicts = Sums((n.AGENT, n.TOOL_NAME, n.VERDICT))
        self.steps = Sums((n.AGENT, n.STEP_STATUS))
        self.compactions = Sums((n.AGENT,))
        self.dropped = Sums((n.DROP_REASON,))
        self.export_failures = export_failures
        counters = (
            ("soulacy.runs", self.runs, "{run}", "Runs ended, by status, reason and verification"),
            ("soulacy.model.calls", self.model_calls, "{call}", "Model calls made"),
            ("soulacy.tokens", self.tokens, "{token}", "Tokens used, by type (input, output)"),
            ("soulacy.cost", self.cost, "USD", "Cost of runs, when price metadata is known"),
            ("soulacy.tool.calls", self.tool_calls, "{call}", "Tool calls, by outcome"),
            ("soulacy.progress.stops", self.progress_stops, "{run}", "Runs stopped: no progress"),
            (
                "soulacy.progress.verdicts",
                self.verdicts,
                "{result}",
                "Tool results judged repeated or stalled",
            ),
            ("soulacy.workflow.steps", self.steps, "{step}", "Workflow steps ended, by status"),
            (
                "soulacy.compactions",
                self.compactions,
                "{compaction}",
                "Model calls whose view the compactor shortened",
            ),
            ("soulacy.otel.spans.dropped", self.dropped, "{span}", "Spans not made: a cap"),
            (
                "soulacy.otel.exports.failed",
                self.export_failures,
                "{batch}",
                "Batches an exporter could not deliver",
            ),
        )
        for name, sums, unit, description in counters:
            meter.create_observable_counter(
                name, callbacks=[sums.observe], unit=unit, description=description
            )
        meter.create_observable_up_down_counter(
            "soulacy.runs.active",
            callbacks=[self.active.observe],
            unit="{run}",
            description="Runs in progress",
        )
        self.run_duration = meter.create_histogram(
            "soulacy.run.duration",
            unit="s",
            description="Duration of runs, from acceptance to the terminal event",
            explicit_bucket_boundaries_advisory=RUN_BUCKETS,
        )
        self.llm_duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration (model calls)",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.token_usage = meter.create_histogram(
            n.TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used (per model call)",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
