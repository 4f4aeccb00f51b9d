"""The effect ledger on SQLite with real processes (tests/_support/effect_ledger.py)."""

from __future__ import annotations

import pytest
from _support.effect_ledger import (
    check_an_idempotent_cut_call_runs_again_under_the_same_key,
    check_an_unsafe_cut_call_waits_for_a_decision,
    sqlite_query,
)

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


@pytest.mark.parametrize("decision", ["deny", "approve", "happened"])
def test_an_unsafe_call_cut_after_its_effect_waits_for_a_decision_on_the_retry(
    workspace: Workspace, decision: str
) -> None:
    check_an_unsafe_cut_call_waits_for_a_decision(workspace, sqlite_query(workspace), decision)


def test_an_idempotent_call_cut_after_its_effect_runs_again_under_the_same_key(
    workspace: Workspace,
) -> None:
    check_an_idempotent_cut_call_runs_again_under_the_same_key(workspace, sqlite_query(workspace))
