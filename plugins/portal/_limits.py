"""The limits each run ran under, kept in the store for the Runs page.

A run's resolved policy is said once, by its ``run.limits`` event, and the stored run record
does not carry it. While the portal is served (its routes were asked for), it keeps each run's
limits as a small state of the store (``portal.run_limits:RUN_ID``), so that a later
``GET /api/v1/runs`` — from this process or another one on the same store — shows them.
Writing never fails a run: a store that refuses is a logged warning, and the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from soulacy.kernel import Event, Kernel, StashKey

log = logging.getLogger("soulacy.portal")
SERVED = StashKey[bool]("portal served")
PREFIX = "portal.run_limits:"


def state_key(run_id: str) -> str:
    return PREFIX + run_id


def serve(kernel: Kernel) -> None:
    """From now on, keep each run's limits (its ``run.limits`` event): the portal is served."""
    if not kernel.stash.get(SERVED, False):
        kernel.stash[SERVED] = True
        kernel.events.observe(lambda event: observe(kernel, event), ["run.limits"])


def observe(kernel: Kernel, event: Event) -> Awaitable[None] | None:
    """Store a ``run.limits`` event's limits while the portal is served."""
    if event.type != "run.limits" or event.run_id is None:
        return None
    if "http" not in kernel.started:  # routes made, but not served (`soulacy run` lists them)
        return None
    return _save(kernel, event.run_id, event.data)


async def _save(kernel: Kernel, run_id: str, limits: Mapping[str, Any]) -> None:
    try:
        await kernel.store().save_state(
            state_key(run_id), {"limits": dict(limits)}, run_id=run_id
        )  # deleted with its run (docs/storage.md, Retention)
    except Exception as exc:  # the page shows no limits for this run; the run goes on
        log.warning("could not keep the limits of run %s for the portal: %s", run_id, exc)


async def load(kernel: Kernel, run_id: str) -> dict[str, Any] | None:
    """The limits a run ran under, as its ``run.limits`` event said them; None when not kept
    (a run from before the portal was served, or one whose write failed)."""
    state = await kernel.store().load_state(state_key(run_id))
    found = state.get("limits") if state else None
    return dict(found) if isinstance(found, Mapping) else None
