"""The effect ledger on PostgreSQL with real processes (tests/_support/effect_ledger.py): the
reservation, the decision and the retry go through the database the processes share."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from _support.effect_ledger import (
    Query,
    check_an_idempotent_cut_call_runs_again_under_the_same_key,
    check_an_unsafe_cut_call_waits_for_a_decision,
)

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes


def on(database: str) -> tuple[dict[str, Any], Query]:
    config = {"plugins": {"enable": ["soulacy.contrib.postgres"]}, "postgres": {"dsn": database}}

    def query(sql: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(database) as conn:
            return list(conn.execute(sql).fetchall())

    return config, query


@pytest.mark.parametrize("decision", ["deny", "approve", "happened"])
def test_an_unsafe_call_cut_after_its_effect_waits_for_a_decision_on_the_retry(
    workspace: Workspace, database: str, decision: str
) -> None:
    config, query = on(database)
    check_an_unsafe_cut_call_waits_for_a_decision(workspace, query, decision, config)


def test_an_idempotent_call_cut_after_its_effect_runs_again_under_the_same_key(
    workspace: Workspace, database: str
) -> None:
    config, query = on(database)
    check_an_idempotent_cut_call_runs_again_under_the_same_key(workspace, query, config)
