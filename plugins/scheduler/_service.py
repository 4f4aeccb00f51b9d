"""The scheduler service: cron ticks, run ownership until execution exits, backoff.

Ownership of a schedule's run is a lease in the store (``schedule:ID``, held by the tick's run
id and renewed by the kernel every ``leases.heartbeat``), held from the start of a run until
the run's task has really ended — also after a timeout or a cancellation — so no tick can
overlap a run still going, however long it takes; such a tick is recorded as skipped, with the
reason. The schedule's state is written fenced by the lease. A lease whose owner is gone (its
process exited, or it stopped renewing for ``leases.ttl``, on any host) is taken over at the
next tick, and noted; the stale owner's run is cancelled as soon as a renewal finds the lease
lost, and its state writes are refused.
Partial results (incomplete, failed, cancelled, timed out, or an output that could not be
delivered) are failures: never recorded or announced as completed.
"""

from __future__ import annotations

import inspect
import logging
import time
import traceback
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import trio
from cronsim import CronSim

from soulacy.kernel import Kernel, redact_text
from soulacy.kernel.store import Lease, LeaseLost, Store

from ._model import ScheduleEntry, SchedulerConfig

RECENT = 20  # skipped ticks and takeovers remembered per schedule
logger = logging.getLogger("soulacy.scheduler")


class WallClock:
    """Wall-clock time that follows Trio's clock, so MockClock drives schedules in tests."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone
        self._wall0 = time.time()
        self._trio0 = trio.current_time()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._wall0 + trio.current_time() - self._trio0, self.zone)

    async def sleep_until(self, when: datetime) -> None:
        await trio.sleep(max(0.0, (when - self.now()).total_seconds()))


def next_tick(cron: str, after: datetime) -> datetime:
    return next(iter(CronSim(cron, after)))


def failure_reason(outcome: Mapping[str, Any]) -> str:
    """Why a failed tick failed, in one word: the run's incomplete reason, else
    ``verification_failed``, ``delivery_failed``, ``error`` or the run's status."""
    reason = outcome.get("incomplete_reason")
    if reason:
        return str(reason)
    if outcome.get("verification") == "failed":
        return "verification_failed"
    if isinstance(outcome.get("delivered"), str):
        return "delivery_failed"
    return "error" if outcome.get("error") else str(outcome.get("status") or "failed")


def state_key(entry: ScheduleEntry) -> str:
    return f"schedule:{entry.id}"


def notes_key(entry: ScheduleEntry) -> str:
    return f"schedule:{entry.id}:notes"


def run_id_of(entry: ScheduleEntry, tick: datetime) -> str:
    """The run id of a tick's run: the holder of the schedule's lease while it runs."""
    return f"schedule:{entry.id}:{tick.isoformat()}"


class SchedulerService:
    name = "scheduler"

    def __init__(
        self, kernel: Kernel, config: SchedulerConfig, entries: list[ScheduleEntry]
    ) -> None:
        self.kernel = kernel
        self.config = config
        self.entries = entries

    async def serve(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        clock = WallClock(ZoneInfo(self.config.timezone))
        async with trio.open_nursery() as nursery:
            for entry in self.entries:
                nursery.start_soon(ScheduleLoop(self, entry, clock).run)
            task_status.started([e.id for e in self.entries])
            await self.kernel.stopping.wait()
            nursery.cancel_scope.cancel()


class ScheduleLoop:
    def __init__(self, service: SchedulerService, entry: ScheduleEntry, clock: WallClock) -> None:
        self.kernel = service.kernel
        self.config = service.config
        self.entry = entry
        self.clock = clock
        self.store: Store = self.kernel.store()
        self.key = state_key(entry)
        self.running = False  # this process's run of the schedule is still executing

    async def run(self) -> None:
        schedule = self.entry.schedule
        async with trio.open_nursery() as runs:
            await self._missed_on_startup(runs)
            tick = next_tick(schedule.cron, self.clock.now())
            while True:
                await self.clock.sleep_until(tick)
                await self._tick(tick, runs)
                tick = next_tick(schedule.cron, max(tick, self.clock.now()))

    async def _missed_on_startup(self, runs: trio.Nursery) -> None:
        schedule = self.entry.schedule
        state = dict(await self.store.load_state(self.key) or {})
        last = state.get("last_tick")
        if not schedule.run_missed_on_startup or last is None:
            return
        now = self.clock.now()
        window = schedule.missed_startup_window
        start = datetime.fromisoformat(last)
        if not window.is_zero:
            start = max(start, now - timedelta(seconds=window.seconds))
        due = None  # the latest tick that was due since then: one catch-up run, not many
        for tick in CronSim(schedule.cron, start):
            if tick > now:
                break
            due = tick
        if due is not None:
            await self._emit("schedule.missed", {"tick": due.isoformat()})
            await self._tick(due, runs)

    async def _tick(self, tick: datetime, runs: trio.Nursery) -> None:
        state = dict(await self.store.load_state(self.key) or {})
        if state.get("disabled"):
            return
        if self.running:
            await self._skip(tick, "the previous run is still executing")
            return
        retry_at = state.get("retry_at")
        if retry_at is not None and tick.timestamp() < retry_at:
            await self._skip(tick, "backing off after a failure")
            return
        lost = trio.CancelScope()  # the run's: cancelled if a renewal finds the lease lost
        held = await self.kernel.leases.acquire(
            self.key, holder=run_id_of(self.entry, tick), wait=False, on_lost=lost.cancel
        )
        if held is None:
            current = await self.store.get_lease(self.key)
            holder = attrs.asdict(current.owner) if current is not None else None
            await self._skip(tick, "another process owns the schedule's run", owner=holder)
            return
        try:
            state = dict(await self.store.load_state(self.key) or {})  # now under the lease
            last = state.get("last_tick")
            if last is not None and datetime.fromisoformat(last) >= tick:  # instants, not strings
                await self.kernel.leases.release(held)
                return  # another process already ran this tick
            previous = held.took_over_from
            if previous is not None:
                await self._note(
                    "takeover",
                    tick,
                    previous_owner=attrs.asdict(previous.owner),
                    previous_lease=previous.describe(),
                )
            state["last_tick"] = tick.isoformat()
            state["owner"] = attrs.asdict(self.kernel.owner)
            await self.store.save_state(self.key, state, fence=held.lease)
        except BaseException:
            await self.kernel.leases.release(held)
            raise
        self.running = True
        runs.start_soon(self._execute, tick, held, lost)

    async def _execute(self, tick: datetime, held: Any, lost: trio.CancelScope) -> None:
        """Run the tick's run while holding the schedule's lease (``held``, the kernel's held
        lease); ``lost`` is cancelled by the kernel if a renewal finds the lease taken over."""
        entry, schedule = self.entry, self.entry.schedule
        outcome: dict[str, Any] = {"tick": tick.isoformat()}
        try:
            with lost:
                deadline = schedule.timeout.seconds if schedule.timeout else 0
                with trio.move_on_after(deadline or float("inf")) as scope:
                    result = await self.kernel.run(
                        entry.agent_id,
                        schedule.text,
                        session_id=f"schedule:{entry.id}",
                        run_id=run_id_of(entry, tick),
                    )
                    outcome.update(
                        run_id=result.run_id,
                        status=result.status,
                        verification=result.verification,
                        incomplete_reason=result.incomplete_reason,
                    )
                    if result.error and result.status != "completed":
                        outcome["error"] = redact_text(result.error)  # why the run failed
                    if result.status == "completed" and result.verification != "failed":
                        outcome["delivered"] = self._deliver(result.reply)
            if lost.cancelled_caught:  # taken over (we stalled past the lease): not ours now
                outcome.update(status="cancelled", incomplete_reason="lease_lost")
            elif scope.cancelled_caught:
                outcome.update(status="incomplete", incomplete_reason="schedule_timeout")
        except trio.Cancelled:  # shutdown: the run did not finish, so it did not succeed
            outcome.update(status="cancelled", incomplete_reason="scheduler_stopped")
            raise
        except Exception as exc:  # a scheduler never dies of one run: the run is a failure
            while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            outcome.update(status="failed", error=redact_text(f"{type(exc).__name__}: {exc}"))
            logger.error(
                "schedule %r: the run of the tick %s failed: %s",
                entry.id,
                tick.isoformat(),
                redact_text("".join(traceback.format_exception(exc)).rstrip()),
            )
        finally:
            # The run's task has really ended here: only now does ownership end.
            with trio.CancelScope(shield=True):
                try:
                    await self._record(outcome, held.lease)
                finally:
                    await self.kernel.leases.release(held)
                    self.running = False

    def _deliver(self, reply: str) -> bool | str:
        output = self.entry.schedule.output
        if not output:
            return True
        path = (self.kernel.workspace / output).resolve()
        try:
            if self.kernel.workspace.resolve() not in path.parents:
                raise OSError(f"{output!r} is outside the workspace")
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(reply, encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:
            path.with_suffix(path.suffix + ".tmp").unlink(missing_ok=True)
            logger.warning("schedule %r: delivery to %r failed: %s", self.entry.id, output, exc)
            return f"delivery to {output!r} failed: {exc}"
        return True

    async def _record(self, outcome: dict[str, Any], fence: Lease) -> None:
        """Record how the run ended in the schedule's state, fenced by its lease: an owner
        that lost the lease (it stalled past ``leases.ttl`` and another process took the
        schedule over) records nothing; the run's end is still emitted and observed."""
        state = dict(await self.store.load_state(self.key) or {})
        success = outcome.get("status") == "completed" and outcome.get("delivered") is True
        if not success and isinstance(outcome.get("delivered"), str):
            outcome["error"] = outcome["delivered"]
        outcome["result"] = "succeeded" if success else "failed"
        state["last_result"] = outcome
        disabled: int | None = None
        if success:
            state["failure_streak"] = 0
            state.pop("retry_at", None)
        else:
            # Kept past later successes: `soulacy schedules` shows why the last failure failed.
            state["last_failure"] = {**outcome, "reason": failure_reason(outcome)}
            streak = int(state.get("failure_streak", 0)) + 1
            state["failure_streak"] = streak
            backoff = self.config.backoff[min(streak, len(self.config.backoff)) - 1]
            state["retry_at"] = self.clock.now().timestamp() + backoff.seconds
            if self.config.max_failures and streak >= self.config.max_failures:
                state["disabled"] = True
                disabled = streak
        state.pop("owner", None)
        try:
            await self.store.save_state(self.key, state, fence=fence)
        except LeaseLost as exc:  # another process owns the schedule now: the state is its
            outcome.setdefault("error", str(exc))
            logger.warning(
                "schedule %r: the end of the run of the tick %s was not recorded: %s",
                self.entry.id,
                outcome.get("tick"),
                exc,
            )
        else:
            if disabled is not None:
                await self._emit("schedule.disabled", {"failure_streak": disabled})
        self._log(outcome, fence.holder, state, disabled)
        await self._emit("schedule.finished", outcome)
        await _call_observers(self.kernel, self.entry, outcome)

    def _log(
        self,
        outcome: Mapping[str, Any],
        holder: str,
        state: Mapping[str, Any],
        disabled: int | None,
    ) -> None:
        """One line per finished tick (docs/scheduling.md#the-log): a success at info, a
        failure at warning with its run, status, reason and error, and what happens next."""
        entry = self.entry
        run_id = outcome.get("run_id") or holder  # absent when the run did not return
        head = f"schedule {entry.id!r} (agent {entry.agent_id!r}): run {run_id}"
        if outcome["result"] == "succeeded":
            logger.info("%s succeeded", head)
            return
        status = outcome.get("status") or "failed"
        reason = failure_reason(outcome)
        error = outcome.get("error")
        why = f" ({' '.join(str(error).split())})" if error else ""  # one line, always
        then = f"failure streak {state.get('failure_streak', 0)}"
        if disabled is not None:
            then += f", disabled after {disabled} failures in a row (scheduler.max_failures)"
        elif state.get("retry_at") is not None:
            retry = datetime.fromtimestamp(float(state["retry_at"]), self.clock.zone)
            then += f", no run before {retry.isoformat(timespec='seconds')} (scheduler.backoff)"
        logger.warning("%s failed: status %s, reason %s%s; %s", head, status, reason, why, then)

    async def _skip(self, tick: datetime, reason: str, **extra: Any) -> None:
        await self._note("skipped", tick, reason=reason, **extra)
        await self._emit("schedule.skipped", {"tick": tick.isoformat(), "reason": reason})

    async def _note(self, kind: str, tick: datetime, **detail: Any) -> None:
        """Skipped ticks and takeovers go under a key of their own: a process that skips a
        tick never writes the state the owner of the run is updating."""
        key = notes_key(self.entry)
        notes = dict(await self.store.load_state(key) or {})
        recent = list(notes.get("recent", []))[-(RECENT - 1) :]
        recent.append({"kind": kind, "tick": tick.isoformat(), **detail})
        notes["recent"] = recent
        notes[f"{kind}_count"] = int(notes.get(f"{kind}_count", 0)) + 1
        await self.store.save_state(key, notes)

    async def _emit(self, type: str, data: Mapping[str, Any]) -> None:
        await self.kernel.events.emit(type, {"schedule": self.entry.id, **data})


async def _call_observers(kernel: Kernel, entry: ScheduleEntry, outcome: Mapping[str, Any]) -> None:
    for result in kernel.hook.soulacy_schedule_finished(
        kernel=kernel, schedule=entry, result=dict(outcome)
    ):
        if inspect.isawaitable(result):
            await result
