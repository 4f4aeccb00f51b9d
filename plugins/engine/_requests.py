"""What is asked of runs by their id or their conversation rather than run: continuing a
stored run, cancelling one wherever it runs, and what identifies a request when it reserves.

These were the kernel's until decision 0083: each reads the store or decides admission, which
is the engine's (``Kernel.continue_run`` and ``request_cancel`` forward here through the
runner). The engine's methods of the ``Runner`` protocol call these functions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from soulacy.kernel import RunHandle, RunNotContinuable, RunRequest, RunResult
from soulacy.kernel.store import canonical_json

if TYPE_CHECKING:
    from soulacy.kernel import Kernel
    from soulacy.kernel.store import ConversationKey

    from ._conversations import ConversationRegistry

_NO_OVERRIDES_PREFIX = '{"overrides":{},"text":'


def request_fingerprint(text: str, overrides: Mapping[str, Any] | None) -> str:
    """What identifies a run's request beyond its conversation: the canonical JSON of its
    text and overrides. Most runs have no overrides: their text alone is encoded (the same
    characters canonical_json gives the whole)."""
    if not overrides:
        return _NO_OVERRIDES_PREFIX + canonical_json(text) + "}"
    return canonical_json({"text": text, "overrides": dict(overrides)})


async def continue_run(
    kernel: Kernel,
    run: Callable[[RunRequest], Awaitable[RunResult]],
    run_id: str,
    text: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    stream: bool = False,
    reservation: RunHandle | None = None,
) -> RunResult:
    """``Runner.continue_run``: the stored run must have ended ``incomplete`` and keep no
    workflow checkpoints; it runs again as ``run`` runs its next attempt."""
    store = kernel.store()
    stored = await store.get_run(run_id)
    if stored is None or stored.status != "incomplete":
        raise RunNotContinuable(run_id, None if stored is None else stored.status)
    if await store.load_checkpoints(run_id):
        raise RunNotContinuable.workflow(run_id, stored.status)
    result = await run(
        RunRequest(
            stored.agent_id,
            text,
            session_id=stored.session_id,
            run_id=run_id,
            user_id=stored.user_id,
            principal=stored.principal,
            overrides=dict(overrides or {}),
            stream=stream,
            continues=True,
            reservation=reservation,
        )
    )
    if result.incomplete_reason == "not_continuable":  # continued elsewhere meanwhile
        found = await store.get_run(run_id)
        raise RunNotContinuable(run_id, None if found is None else found.status)
    return result


async def request_cancel(
    kernel: Kernel, conversations: ConversationRegistry, run_id: str, reason: str
) -> bool:
    """``Runner.request_cancel``: here first; else, if a process sharing the store runs it,
    a request in the store that its cancel watcher reads."""
    if conversations.cancel_run(run_id, reason) > 0:
        return True
    store = kernel.store()
    if not store.multi_process:
        return False
    record = await store.get_run(run_id)
    if record is None or record.status != "running":
        return False
    await store.request_cancel(reason, run_id=run_id)
    return True


async def request_cancel_conversation(
    kernel: Kernel, conversations: ConversationRegistry, key: ConversationKey, reason: str
) -> int:
    """``Runner.request_cancel_conversation``: here, then through the store for the others."""
    count = conversations.cancel_conversation(key, reason)
    store = kernel.store()
    if store.multi_process:
        await store.request_cancel(reason, lease_key=key.lease_key())
    return count
