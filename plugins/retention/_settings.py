"""The ``retention`` plugin's settings: a module of its own, imported when the configuration is
read, so that registering the plugin imports neither attrs' classes nor the configuration's
machinery (decision 0036)."""

from __future__ import annotations

import attrs

from soulacy.kernel import Duration

DAY = 24 * 3600
RUN_EVENTS_KEPT = DAY  # every store drops a run's stream events after a day, finished or not


@attrs.frozen
class RetentionConfig:
    """``retention:`` in config.yaml: how long what runs leave is kept (docs/storage.md,
    Retention). A limit absent, ``null`` or ``0`` keeps that kind for ever.

    ``history`` (kept by default): conversation entries older than this. ``proofs`` (kept by
    default): proofs, and those of earlier attempts. ``runs`` (kept by default): finished runs
    with everything they left (history, tool records, proof, events, checkpoints, decided
    approvals, the plugin state of the run). ``run_events`` (default ``24h``, at most ``24h``):
    the stream events of finished runs. ``leases`` (default ``24h``): lease rows released, or
    expired for longer than this (a pruned key is granted again with a greater token).
    ``every`` (default ``1h``; ``0``: the job is off): how often ``soulacy serve`` applies
    them, at its start and then on that period.

    Nothing of a run that is not finished is ever deleted, nor another principal's rows.
    """

    history: Duration | None = None
    run_events: Duration | None = Duration(RUN_EVENTS_KEPT)
    proofs: Duration | None = None
    runs: Duration | None = None
    leases: Duration | None = Duration(DAY)
    every: Duration = Duration(3600)
