"""``check_checkpoint_store``: the checkpoint part of the store kit (checkpoints and plugin
state), for a store that implements only :class:`~soulacy.kernel.store.CheckpointStore`."""

from __future__ import annotations

from collections.abc import Iterable

from ._store import (
    CHECKPOINT_CHECKS,
    CheckpointStoreFactory,
    _checkpoint_failures_raise,
    check_name,
    run_checks,
    select_checks,
)

# -- checkpoint stores --------------------------------------------------------------------------


CHECKPOINT_FAILURES_RAISE = check_name(_checkpoint_failures_raise)  # the ``failing`` check
CHECKPOINT_CHECK_NAMES: tuple[str, ...] = (
    *map(check_name, CHECKPOINT_CHECKS),
    CHECKPOINT_FAILURES_RAISE,
)


async def check_checkpoint_store(
    factory: CheckpointStoreFactory,
    *,
    failing: CheckpointStoreFactory | None = None,
    only: str | Iterable[str] | None = None,
) -> None:
    """The checkpoint part of :func:`check_store`: checkpoints (order, upsert, legacy identity,
    discard) and plugin state, each on a fresh store. ``check_store`` runs these checks too,
    with those of every other role of the store (leases, fencing, runs …).

    ``failing``, when given, makes a store whose storage fails on every call: each call must
    raise StorageError (a failed read of checkpoints is never an empty list; the check
    ``checkpoint_failures_raise``). ``only`` runs the checks it names, of
    :data:`CHECKPOINT_CHECK_NAMES`, and no other; an unknown name, or
    ``checkpoint_failures_raise`` without ``failing``, is a ValueError."""
    selected = select_checks("checkpoint store", CHECKPOINT_CHECK_NAMES, only)
    if only is not None and CHECKPOINT_FAILURES_RAISE in selected and failing is None:
        raise ValueError(
            f"checkpoint store kit: the check {CHECKPOINT_FAILURES_RAISE} needs failing= (a"
            " factory of a store whose storage fails on every call)"
        )
    checks = [c for c in CHECKPOINT_CHECKS if check_name(c) in selected]
    await run_checks("checkpoint store", factory, checks)
    if failing is not None and CHECKPOINT_FAILURES_RAISE in selected:
        await run_checks("checkpoint store", failing, (_checkpoint_failures_raise,))
