"""The builtin scheduler: agents run on their cron expression, one run at a time.

SOUL.yaml::

    schedule:
      cron: "0 7 * * *"             # cronsim syntax, in scheduler.timezone (UTC by default)
      text: "Write the morning report."
      timeout: 2h                   # optional; the execution policy still applies
      run_missed_on_startup: true
      missed_startup_window: 24h
      output: reports/morning.md    # the final reply is written here; a failed write fails

See docs/scheduling.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from soulacy.kernel import CliCommand, SoulacyError, hookimpl, lazy_exports

from . import hookspecs

log = logging.getLogger("soulacy.scheduler")

if TYPE_CHECKING:
    import argparse

    import pluggy

    from soulacy.kernel import (
        AgentSpec,
        CliContext,
        ConfigIssue,
        ConfigSection,
        Kernel,
        Service,
        Settings,
    )
    from soulacy.kernel.store import Lease

    from ._model import Schedule, ScheduleEntry, SchedulerConfig
    from ._service import SchedulerService

# Imported on first use (PEP 562): declaring the plugin's hooks and command costs no import of
# cronsim, the store or the service (decision 0036).
_LAZY = {
    "Schedule": "._model",
    "ScheduleEntry": "._model",
    "SchedulerConfig": "._model",
    "SchedulerService": "._service",
}


if not TYPE_CHECKING:  # imported on first use (PEP 562): registering the plugin stays light
    __getattr__ = lazy_exports(__name__, _LAZY)


__all__ = ["Schedule", "ScheduleEntry", "SchedulerConfig", "SchedulerService", "schedules"]


def schedules(kernel: Kernel) -> list[ScheduleEntry]:
    """Every enabled schedule: agents' ``schedule:`` keys and what plugins contribute."""
    from ._model import ScheduleEntry

    found = []
    for agent_id in kernel.agent_ids():
        try:
            agent = kernel.agent(agent_id)
        except SoulacyError as exc:  # one broken SOUL.yaml stops no other agent's schedule
            log.warning(
                "agent %r has no schedule while its SOUL.yaml is invalid: %s", agent_id, exc
            )
            continue
        if agent.section("schedule") is not None and agent.section("enabled"):
            found.append(ScheduleEntry(agent_id, agent_id, agent.section("schedule")))
    for contributed in kernel.hook.soulacy_schedules(kernel=kernel):
        found.extend(cast("Sequence[ScheduleEntry]", contributed or ()))
    return [entry for entry in found if entry.schedule.enabled]


@hookimpl
def soulacy_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)  # hooks this plugin calls, for others to implement


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._model import Schedule, SchedulerConfig

    return [
        ConfigSection("scheduler", SchedulerConfig, doc="cron runs"),
        ConfigSection("schedule", Schedule | None, scope="agent", doc="when the agent runs"),
    ]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from soulacy.kernel import ConfigIssue, Location

    scheduler: SchedulerConfig = config.section("scheduler")
    issues = []
    if not scheduler.backoff:
        loc = config.source_of("scheduler.backoff") or Location(str(config.file))
        issues.append(
            ConfigIssue(loc, "scheduler.backoff", "expected at least one duration", [], True)
        )
    if scheduler.max_failures < 0:
        loc = config.source_of("scheduler.max_failures") or Location(str(config.file))
        issues.append(
            ConfigIssue(
                loc,
                "scheduler.max_failures",
                "expected 0 (never) or more",
                scheduler.max_failures,
                True,
            )
        )
    zone = scheduler.timezone
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        loc = config.source_of("scheduler.timezone") or Location(str(config.file))
        message = "unknown time zone (e.g. UTC, Europe/Oslo)"
        issues.append(ConfigIssue(loc, "scheduler.timezone", message, zone, True))
    return issues


@hookimpl
def soulacy_validate_agent(agent: AgentSpec) -> Sequence[ConfigIssue]:
    from datetime import datetime

    from cronsim import CronSim, CronSimError

    from soulacy.kernel import ConfigIssue, Location

    schedule: Schedule | None = agent.section("schedule")
    if schedule is None:
        return []
    try:
        CronSim(schedule.cron, datetime.now())
    except CronSimError as exc:
        loc = agent.settings.source_of("schedule.cron") or Location(str(agent.file))
        return [
            ConfigIssue(
                loc, "schedule.cron", f"invalid cron expression: {exc}", schedule.cron, True
            )
        ]
    return []


@hookimpl
def soulacy_services(kernel: Kernel) -> Sequence[Service]:
    from ._service import SchedulerService

    config: SchedulerConfig = kernel.config.section("scheduler")
    entries = schedules(kernel) if config.enabled else []
    return [SchedulerService(kernel, config, entries)] if entries else []


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "schedules",
            "each schedule: next run, last result, failures, owner",
            "soulacy.plugins.scheduler:_schedules",
            _configure,
            read_only=True,
        )
    ]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


async def _schedules(args: argparse.Namespace, ctx: CliContext) -> int:
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from ._service import failure_reason, next_tick, notes_key, state_key

    kernel = ctx.kernel()
    config: SchedulerConfig = kernel.config.section("scheduler")
    zone = ZoneInfo(config.timezone)
    rows: list[dict[str, Any]] = []
    try:
        store = kernel.store()
        for entry in schedules(kernel):
            state = dict(await store.load_state(state_key(entry)) or {})
            notes = dict(await store.load_state(notes_key(entry)) or {})
            lease = await store.get_lease(state_key(entry))
            rows.append(
                {
                    "id": entry.id,
                    "agent_id": entry.agent_id,
                    "cron": entry.schedule.cron,
                    "next_run": next_tick(entry.schedule.cron, datetime.now(zone)).isoformat(),
                    "last_result": state.get("last_result"),
                    "last_failure": _last_failure(state, failure_reason),
                    "failure_streak": state.get("failure_streak", 0),
                    "disabled": bool(state.get("disabled")),
                    "skipped": notes.get("skipped_count", 0),
                    "owner": _owner(lease),
                }
            )
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json(rows)
        return 0
    if not rows:
        ctx.print("no schedules")
    for row in rows:
        last = row["last_result"] or {}
        when = "disabled" if row["disabled"] else f"next {row['next_run']}"
        owner = ""
        if row["owner"]:
            owner = f", running in pid {row['owner']['pid']}"
            if row["owner"]["expired"]:
                owner += " (its lease expired: the next tick takes it over)"
        ctx.print(
            f"{row['id']} ({row['cron']}): {when}; last: {last.get('result', '-')}"
            f" ({last.get('status', '-')}); failure streak {row['failure_streak']}{owner}"
        )
        failure = row["last_failure"]
        if failure:
            run = f" (run {failure['run_id']})" if failure.get("run_id") else ""
            error = f": {' '.join(str(failure['error']).split())}" if failure.get("error") else ""
            ctx.print(
                f"  last failure: tick {failure.get('tick', '-')}{run}: status"
                f" {failure['status']}, reason {failure['reason']}{error}"
            )
    return 0


def _last_failure(
    state: Mapping[str, Any], reason_of: Callable[[Mapping[str, Any]], str]
) -> dict[str, Any] | None:
    """The last failed tick: its tick, run, status, reason and error (issue 38). A state
    recorded before ``last_failure`` existed still has it when its last result failed."""
    failure = state.get("last_failure")
    if failure is None:
        last = state.get("last_result") or {}
        failure = last if last.get("result") == "failed" else None
    if not failure:
        return None
    return {
        "tick": failure.get("tick"),
        "run_id": failure.get("run_id"),
        "status": failure.get("status") or "failed",
        "reason": failure.get("reason") or reason_of(failure),
        "error": failure.get("error"),
    }


def _owner(lease: Lease | None) -> dict[str, Any] | None:
    """Who holds a schedule's lease (its run is executing there), and whether it expired."""
    if lease is None:
        return None
    return {
        "pid": lease.owner.pid,
        "host": lease.owner.host,
        "holder": lease.holder,
        "heartbeat_at": lease.renewed_at,
        "expires_at": lease.expires_at,
        "expired": lease.expired,
    }
