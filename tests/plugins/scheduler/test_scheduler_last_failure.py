"""`soulacy schedules` shows the last failure: the status, reason and error of the last failed
tick, even after later successes (issue 38, observation 10: "schedules gives no reason for a
failure")."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace

KEY = "schedule:cron"


async def _listing(workspace: Workspace, soulacy_cli: Callable[..., Any], *args: str) -> str:
    done = await trio.to_thread.run_sync(
        lambda: soulacy_cli(["schedules", *args], cwd=workspace.path)
    )
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


async def _save(make_kernel: Callable[..., Kernel], state: dict[str, Any]) -> None:
    kernel = make_kernel()  # the workspace's SQLite store, as the command reads it
    try:
        await kernel.store().save_state(KEY, state)
    finally:
        await kernel.aclose()


async def test_the_listing_shows_the_last_failure_after_a_success(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., Any],
) -> None:
    workspace.write_config("server:\n  enabled: false\n")
    workspace.scripted_agent("cron", [{"text": "ok"}], schedule={"cron": "0 7 * * *"})
    failed = {
        "tick": "2026-12-04T07:00:00+00:00",
        "run_id": "run-failed-1",
        "status": "failed",
        "result": "failed",
        "error": "ProviderError: the provider\nanswered 503",
    }
    await _save(
        make_kernel,
        {
            "last_result": {
                "tick": "2026-12-05T07:00:00+00:00",
                "status": "completed",
                "result": "succeeded",
            },
            "last_failure": {**failed, "reason": "error"},
            "failure_streak": 0,
        },
    )
    (row,) = json.loads(await _listing(workspace, soulacy_cli, "--json"))
    assert row["last_failure"] == {
        "tick": "2026-12-04T07:00:00+00:00",
        "run_id": "run-failed-1",
        "status": "failed",
        "reason": "error",
        "error": "ProviderError: the provider\nanswered 503",
    }
    text = await _listing(workspace, soulacy_cli)
    assert (
        "  last failure: tick 2026-12-04T07:00:00+00:00 (run run-failed-1): status failed,"
        " reason error: ProviderError: the provider answered 503" in text
    ), text


async def test_a_state_whose_last_result_failed_shows_it_as_the_last_failure(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., Any],
) -> None:
    workspace.write_config("server:\n  enabled: false\n")
    workspace.scripted_agent("cron", [{"text": "ok"}], schedule={"cron": "0 7 * * *"})
    await _save(
        make_kernel,
        {
            "last_result": {
                "tick": "2026-12-05T07:00:00+00:00",
                "run_id": "r2",
                "status": "incomplete",
                "incomplete_reason": "schedule_timeout",
                "result": "failed",
            },
            "failure_streak": 1,
        },
    )
    text = await _listing(workspace, soulacy_cli)
    assert "last failure: tick 2026-12-05T07:00:00+00:00 (run r2): status incomplete," in text
    assert "reason schedule_timeout" in text, text


async def test_no_failure_no_line(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    soulacy_cli: Callable[..., Any],
) -> None:
    workspace.write_config("server:\n  enabled: false\n")
    workspace.scripted_agent("cron", [{"text": "ok"}], schedule={"cron": "0 7 * * *"})
    text = await _listing(workspace, soulacy_cli)
    assert "last failure" not in text, text
    (row,) = json.loads(await _listing(workspace, soulacy_cli, "--json"))
    assert row["last_failure"] is None


async def test_a_failed_tick_is_kept_as_the_last_failure_with_its_reason(
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
    autojump_clock: trio.abc.Clock,
) -> None:
    # The model asks for a tool, then has nothing more to say: the run cannot end well.
    workspace.scripted_agent("short", [{"tool": "missing"}], schedule={"cron": "* * * * *"})
    kernel = make_kernel(plugins=["no:http", "no:sqlite_store"])
    async with open_kernel(kernel=kernel):
        store = kernel.store()
        while True:
            state = await store.load_state("schedule:short")
            if state and state.get("last_result"):
                break
            await trio.sleep(1)
    failure = state["last_failure"]
    assert failure["result"] == "failed"
    assert failure["status"] == state["last_result"]["status"]
    assert failure["reason"], failure
    assert failure["run_id"] == state["last_result"]["run_id"]
