"""Two kernels on one SQLite file (two processes of one host share it so) start the same fresh
run id at once: the store lets exactly one own it (issue 42, observation 5). Alice and bob race
it; alice races it from two sessions; neither loses anything."""

from __future__ import annotations

from collections.abc import Callable

from _support.run_id_race import agent, check_one_owner

from soulacy.kernel import Kernel
from soulacy.testing import Workspace


async def test_alice_and_bob_racing_one_fresh_run_id_on_one_file_make_one_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    await check_one_owner(
        make_kernel, [("alice", "s-alice"), ("bob", "s-bob")], ["session_id", "principal"]
    )


async def test_alice_racing_one_fresh_run_id_from_two_sessions_makes_one_run(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    agent(workspace)
    await check_one_owner(make_kernel, [("alice", "s-1"), ("alice", "s-2")], ["session_id"])
