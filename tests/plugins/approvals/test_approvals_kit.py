"""The store kit's approval checks are proven by planted bugs: each is caught by the check it
targets, run alone, and the failure names the check and says what was expected and what came
back."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

from soulacy.kernel.store import (
    EVERY_PRINCIPAL,
    AlreadyDecided,
    ApprovalDecision,
    ApprovalRequest,
    EveryPrincipal,
    Lease,
    RunRecord,
)
from soulacy.plugins.memory_store import MemoryStore
from soulacy.testing import STORE_CHECK_NAMES, check_store

MESSAGE = re.compile(r"^store check (\w+): .*\S.*: expected \S.*, got \S.*", re.DOTALL)
APPROVAL_CHECKS = [
    name
    for name in STORE_CHECK_NAMES
    if name.startswith("approvals") or name in ("effect_ledger", "suspended_wait")
]


class SecondDecisionOverwrites(MemoryStore):
    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        found = await self.get_approval(run_id, call_id, principal)
        if found is None:
            return None
        decided = attrs.evolve(found, decision=decision)  # the bug: no check of a decision made
        self._approvals[(run_id, call_id)] = decided
        return decided


class DecisionDropsTheResult(MemoryStore):
    """The bug: a decision's ``result`` (a cut call that happened) is not kept, so the run's
    retry takes it for a denial and tells the model the call was not run again."""

    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        dropped = attrs.evolve(decision, result=None)
        return await super().decide_approval(run_id, call_id, dropped, principal)


class DecisionIgnoresPrincipal(MemoryStore):
    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        return await super().decide_approval(run_id, call_id, decision)


class RequestReplacesTheStoredOne(MemoryStore):
    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        self._approvals.pop((request.run_id, request.call_id), None)
        return await super().request_approval(request, fence)


class DecisionRaces(MemoryStore):
    async def decide_approval(
        self,
        run_id: str,
        call_id: str,
        decision: ApprovalDecision,
        principal: str | EveryPrincipal | None = EVERY_PRINCIPAL,
    ) -> ApprovalRequest | None:
        found = await self.get_approval(run_id, call_id, principal)
        if found is None:
            return None
        if found.decision is not None:
            raise AlreadyDecided(found)
        await trio.lowlevel.checkpoint()  # the bug: the check and the write are not one step
        decided = attrs.evolve(found, decision=attrs.evolve(decision, decided_at=time.time()))
        self._approvals[(run_id, call_id)] = decided
        return decided


class RequestUnfenced(MemoryStore):
    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        return await super().request_approval(request)


class ListIgnoresPending(MemoryStore):
    async def list_approvals(self, *args: Any, pending: bool = False, **kwargs: Any) -> Any:
        return await super().list_approvals(*args, **kwargs)


class RetryRequestReplacesADecision(MemoryStore):
    """The bug: a retry's request of a call already decided stores it pending again (an
    upsert), so a suspended run resumed by its decision waits for another one."""

    async def request_approval(
        self, request: ApprovalRequest, fence: Lease | None = None
    ) -> ApprovalRequest:
        found = self._approvals.get((request.run_id, request.call_id))
        if found is not None and found.decision is not None:
            del self._approvals[(request.run_id, request.call_id)]
        return await super().request_approval(request, fence)


class ReleaseDropsPendingRequests(MemoryStore):
    """The bug: giving back a lease drops the pending requests of the run that held it, as if
    the run had ended; a suspended run can then never be decided."""

    async def release_lease(self, lease: Lease) -> None:
        await super().release_lease(lease)
        for key in [k for k, r in self._approvals.items() if r.pending and k[0] == lease.holder]:
            del self._approvals[key]


class RetryStartsWithoutTheRunsState(MemoryStore):
    """The bug: a new attempt of a run drops the state saved for it (``run_id=``), as if a
    retry started clean, so the effect ledger's retry never learns which calls a crash cut
    and runs them again blindly."""

    def __init__(self) -> None:
        super().__init__()
        self.run_state: dict[str, set[str]] = {}

    async def save_state(
        self,
        key: str,
        value: Mapping[str, Any],
        fence: Lease | None = None,
        *,
        run_id: str | None = None,
    ) -> None:
        await super().save_state(key, value, fence, run_id=run_id)
        if run_id is not None:
            self.run_state.setdefault(run_id, set()).add(key)

    async def start_run(self, run: RunRecord, fence: Lease | None = None) -> RunRecord:
        started = await super().start_run(run, fence)
        if started.attempt > 1:
            for key in self.run_state.pop(run.run_id, set()):
                self._state.pop(key, None)
        return started


@pytest.mark.parametrize(
    ("store", "check"),
    [
        (SecondDecisionOverwrites, "approvals"),
        (DecisionIgnoresPrincipal, "approvals"),
        (DecisionDropsTheResult, "approvals"),
        (RequestReplacesTheStoredOne, "approvals"),
        (DecisionRaces, "approvals"),
        (RequestUnfenced, "approvals_fenced"),
        (ListIgnoresPending, "approvals"),
        (RetryRequestReplacesADecision, "suspended_wait"),
        (RetryStartsWithoutTheRunsState, "effect_ledger"),
        (ReleaseDropsPendingRequests, "suspended_wait"),
    ],
)
async def test_the_kit_catches_a_planted_approval_bug(store: type[MemoryStore], check: str) -> None:
    with pytest.raises(AssertionError) as caught:
        await check_store(store, only=check)
    message = str(caught.value)
    found = MESSAGE.match(message)
    assert found is not None, message
    assert found.group(1) == check, message
    if store is DecisionRaces:
        assert "four concurrent decisions of one call: the refusals" in message
    if store is DecisionDropsTheResult:
        assert "the result of a cut call that happened" in message


def test_the_store_kit_has_the_approval_checks() -> None:
    assert APPROVAL_CHECKS == ["approvals", "approvals_fenced", "effect_ledger", "suspended_wait"]


@pytest.mark.parametrize("check", APPROVAL_CHECKS)
async def test_the_memory_store_passes_the_approval_checks(check: str) -> None:
    await check_store(MemoryStore, only=check)  # the reference: without a bug, nothing is caught
