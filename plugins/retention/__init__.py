"""The builtin ``retention`` plugin: what runs leave is deleted once older than the workspace's
limits, by a job of ``soulacy serve``. config.yaml::

    retention:
      history: 2160h     # conversation entries (90 days; kept for ever by default)
      proofs: 8760h      # proofs (a year; kept for ever by default)
      runs: 4320h        # finished runs with all they left (180 days; kept by default)
      run_events: 24h    # stream events of finished runs (the default, and the most)
      leases: 24h        # released or long-expired lease rows (the default)
      every: 1h          # how often the job runs (0: never)

Nothing of a run that is not finished is deleted, nor another principal's rows. The store
does the deleting (``RetentionStore.prune``); a store without it (the in-memory one) keeps
everything. See docs/storage.md, Retention.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulacy.kernel import hookimpl

if TYPE_CHECKING:
    from soulacy.kernel import ConfigIssue, ConfigSection, Kernel, Service, Settings


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._settings import RetentionConfig

    return [ConfigSection("retention", RetentionConfig, doc="how long run data is kept")]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    from soulacy.kernel import ConfigIssue, Location

    from ._settings import RUN_EVENTS_KEPT, RetentionConfig

    retention: RetentionConfig = config.section("retention")
    events = retention.run_events
    if events is not None and float(events.seconds) > RUN_EVENTS_KEPT:
        loc = config.source_of("retention.run_events") or Location(str(config.file))
        message = "at most 24h (every store drops a run's stream events after a day)"
        return [ConfigIssue(loc, "retention.run_events", message, str(events), True)]
    return []


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    # A job of a long-lived server (`soulacy serve`, the HTTP transport), as the approvals'
    # resume service is: a command or an embedded kernel prunes nothing behind its caller's back.
    if not kernel.pm.has_plugin("http"):
        return []
    from ._service import RetentionService

    return [RetentionService(kernel, kernel.config.section("retention"))]
