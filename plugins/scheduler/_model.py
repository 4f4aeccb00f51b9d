"""The ``schedule:`` key of SOUL.yaml and the ``scheduler:`` section of config.yaml."""

from __future__ import annotations

import attrs

from soulacy.kernel import Duration


@attrs.frozen
class Schedule:
    """When an agent runs by itself. ``cron`` is a 5-field cron expression (cronsim syntax)."""

    cron: str
    text: str = "Run your scheduled task."
    timeout: Duration | None = None  # a deadline of the schedule's own, on top of the policy
    run_missed_on_startup: bool = False
    missed_startup_window: Duration = Duration(24 * 3600)
    output: str | None = None  # a file in the workspace that receives the final reply
    enabled: bool = True


@attrs.frozen
class SchedulerConfig:
    enabled: bool = True
    timezone: str = "UTC"
    max_failures: int = 5  # a failure streak this long disables the schedule (0: never)
    backoff: list[Duration] = attrs.Factory(
        lambda: [Duration(30), Duration(60), Duration(300), Duration(900), Duration(3600)]
    )
    # Superseded by ``leases.heartbeat`` (the schedule's lease is renewed by the kernel);
    # still accepted so that a config.yaml that sets it stays valid.
    heartbeat: Duration = Duration(30)


@attrs.frozen
class ScheduleEntry:
    """A schedule to run: from an agent's SOUL.yaml or contributed by a plugin (a monitor)."""

    id: str
    agent_id: str
    schedule: Schedule
