"""The ``retention:`` section, applied by ``soulacy serve``'s job on the SQLite store: old
finished runs go with everything they left; running runs and another principal's rows stay;
the defaults keep history and proofs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from retention_support import DAY, SERVED, age_statements, kept, two_principals

from soulacy.kernel import ConfigError, Kernel, open_kernel
from soulacy.plugins.retention._service import RetentionService, limits
from soulacy.plugins.retention._settings import RetentionConfig
from soulacy.testing import Workspace, check_service_stops

BEFORE = {
    "a-old": {"run": True, "proof": True, "state": True, "records": ["c1"]},
    "b-new": {"run": True, "proof": True, "state": True, "records": ["c1"]},
    "a-going": {"run": True, "proof": False, "state": True, "records": ["c1"]},
    "b-going": {"run": True, "proof": False, "state": True, "records": ["c1"]},
    "alice": ["alice: a-old", "alice: a-going"],
    "bob": ["bob: b-new", "bob: b-going"],
}


def age(path: Path, run_id: str, seconds: float) -> None:
    conn = sqlite3.connect(path)
    try:
        with conn:
            for statement in age_statements("?"):
                conn.execute(statement, (seconds, run_id))
    finally:
        conn.close()


async def seeded(make_kernel: Callable[..., Kernel], workspace: Workspace) -> Path:
    """The two principals' runs in the workspace's store; alice's finished run 100 days old."""
    kernel = make_kernel()
    await two_principals(kernel.store())
    await kernel.aclose()
    path = workspace.path / "soulacy.db"
    age(path, "a-old", 100 * DAY)
    return path


async def swept(kernel: Kernel) -> dict[str, Any]:
    """Open the kernel with its services until the retention job has swept once."""
    async with open_kernel(kernel=kernel):
        service = kernel.started["retention"]
        assert isinstance(service, RetentionService)
        await service.wait_sweeps(1)
        return await kept(kernel.store())


async def test_old_finished_runs_go_with_their_rows_and_nobody_elses(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(SERVED + "retention:\n  runs: 720h\n")
    await seeded(make_kernel, workspace)
    after = await swept(make_kernel())
    gone = {"run": False, "proof": False, "state": False, "records": []}
    # alice's finished run is gone with its history, records, proof and portal state; her
    # running run and every row of bob's (the same session, agent and tool call ids) stay.
    assert after == {**BEFORE, "a-old": gone, "alice": ["alice: a-going"]}


async def test_the_defaults_keep_history_proofs_and_runs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(SERVED)
    await seeded(make_kernel, workspace)
    assert await swept(make_kernel()) == BEFORE


async def test_history_and_proof_limits_keep_the_runs(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(SERVED + "retention:\n  history: 720h\n  proofs: 720h\n")
    await seeded(make_kernel, workspace)
    after = await swept(make_kernel())
    old = {"run": True, "proof": False, "state": True, "records": []}
    assert after == {**BEFORE, "a-old": old, "alice": ["alice: a-going"]}


async def test_a_running_run_is_never_pruned_however_old(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(SERVED + "retention:\n  runs: 24h\n  history: 24h\n  proofs: 24h\n")
    path = await seeded(make_kernel, workspace)
    age(path, "a-going", 100 * DAY)
    age(path, "b-going", 100 * DAY)
    after = await swept(make_kernel())
    assert after["a-going"] == BEFORE["a-going"]
    assert after["b-going"] == BEFORE["b-going"]
    assert after["alice"] == ["alice: a-going"]
    assert after["bob"] == BEFORE["bob"]


def test_run_events_are_kept_at_most_a_day(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(SERVED + "retention:\n  run_events: 48h\n")
    with pytest.raises(ConfigError, match=r"retention\.run_events.*at most 24h"):
        make_kernel()


async def test_the_job_stops_with_the_kernel(make_kernel: Callable[..., Kernel]) -> None:
    kernel = make_kernel()
    service = RetentionService(kernel, kernel.config.section("retention"))
    assert await check_service_stops(kernel, service) is service
    await kernel.aclose()


def test_storage_md_shows_the_defaults_as_they_are(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    text = (Path(__file__).parents[3] / "docs" / "storage.md").read_text()
    section = text[text.index("## Retention") :]
    sample = section[section.index("```yaml\n") + 8 : section.index("```\n", 8)]
    assert sample.startswith("# config.yaml (the defaults)\nretention:\n")
    workspace.write_config(sample)
    shown = make_kernel().config.section("retention")
    assert limits(shown) == limits(RetentionConfig())
    assert shown.every == RetentionConfig().every


async def test_the_portal_keeps_a_runs_limits_as_state_of_that_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    from soulacy.plugins.portal import _limits

    kernel = make_kernel()
    await _limits._save(kernel, "r-7", {"max_turns": {"value": 3}})
    await kernel.aclose()
    conn = sqlite3.connect(workspace.path / "soulacy.db")
    try:
        rows = conn.execute("SELECT key, run_id FROM plugin_state").fetchall()
    finally:
        conn.close()
    assert rows == [("portal.run_limits:r-7", "r-7")]  # so it goes when r-7 is pruned
