"""The engine's configuration: ``leases:`` and ``on_limit:`` in config.yaml."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from soulacy.kernel import ConfigIssue, Duration, Location, Settings

# ``on_limit:`` (config.yaml, and an agent's SOUL.yaml): what a run at a count limit does
OnLimit = Literal["end", "pause"]


@attrs.frozen
class LeaseSettings:
    """``leases:`` in config.yaml.

    ``ttl`` 30s: a host that dies (not only its process: a dead process on the same host is
    taken over at once) blocks what it held for at most 30 s, while a stall of the owner up
    to two heartbeats (a long GC, a busy disk) does not cost it the lease. ``heartbeat`` 10s:
    three renewals per lease length, one small write each. ``cancel_poll`` 1s: how soon a
    cancellation asked from another process reaches the run (one read).
    """

    ttl: Duration = Duration(30)
    heartbeat: Duration = Duration(10)
    cancel_poll: Duration = Duration(1)


def lease_issues(config: Settings) -> list[ConfigIssue]:
    """A heartbeat must come well within the lease, or every lease expires between two."""
    settings: LeaseSettings = config.section("leases")
    ttl, heartbeat = settings.ttl.seconds, settings.heartbeat.seconds
    problems: list[tuple[str, str, Any]] = []
    if ttl <= 0:
        problems.append(("leases.ttl", "a duration above zero", settings.ttl))
    elif not 0 < heartbeat <= ttl / 2:
        expected = f"above zero and at most half of leases.ttl ({settings.ttl})"
        problems.append(("leases.heartbeat", expected, settings.heartbeat))
    if settings.cancel_poll.seconds <= 0:
        problems.append(("leases.cancel_poll", "a duration above zero", settings.cancel_poll))
    return [
        ConfigIssue(
            config.source_of(key) or Location(str(config.file)), key, expected, str(value), True
        )
        for key, expected, value in problems
    ]
