"""Identity below the transport (step 13, observation 1): a conversation is keyed by agent,
session, principal and user, so the same session id used by another principal is another
conversation, whose model input never holds the first one's messages."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _support import echo_model

from soulacy.kernel import Kernel
from soulacy.testing import Workspace

TESTS = Path(__file__).resolve().parent.parent


@pytest.fixture
def echo_workspace(workspace: Workspace) -> Workspace:
    workspace.write_agent("a", {"llm": {"provider": "echo"}})
    return workspace


def load(workspace: Workspace) -> Kernel:
    return Kernel.load(workspace.path, extra_plugins=[echo_model], autoload=False)


async def test_another_principal_on_the_same_session_gets_its_own_conversation(
    echo_workspace: Workspace,
) -> None:
    kernel = load(echo_workspace)  # the SQLite store: a real file in the workspace
    first = await kernel.run("a", "password hunter2", session_id="s", principal="alice")
    assert first.status == "completed"
    other = await kernel.run("a", "what was said?", session_id="s", principal="bob")
    assert "hunter2" not in other.reply, "bob's model input held alice's message"
    assert other.reply == "seen: what was said?"
    again = await kernel.run("a", "and now?", session_id="s", principal="alice")
    assert again.reply == "seen: password hunter2 | and now?", "alice's conversation continues"


async def test_users_of_one_principal_have_separate_conversations(
    echo_workspace: Workspace,
) -> None:
    kernel = load(echo_workspace)
    await kernel.run("a", "my pin is 4321", session_id="s", principal="app", user_id="u1")
    other = await kernel.run("a", "hi", session_id="s", principal="app", user_id="u2")
    assert other.reply == "seen: hi"


async def test_a_reopened_store_keeps_conversations_apart(echo_workspace: Workspace) -> None:
    await load(echo_workspace).run("a", "password hunter2", session_id="s", principal="alice")
    kernel = load(echo_workspace)  # a new process would open the file the same way
    store = kernel.store()
    assert await store.load_history("a", "s", "bob") == []
    assert next(m.content for m in await store.load_history("a", "s", "alice")) == (
        "password hunter2"
    )
    bob_view = await store.history("s", principal="bob")
    assert bob_view == []


def test_the_cli_operator_does_not_continue_a_principals_conversation(
    echo_workspace: Workspace, soulacy_cli: Any
) -> None:
    import trio

    trio.run(lambda: load(echo_workspace).run("a", "hunter2", session_id="s", principal="alice"))
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = soulacy_cli(
        ["-p", "_support.echo_model", "run", "a", "what was said?", "--session", "s"],
        cwd=echo_workspace.path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "hunter2" not in done.stdout
    assert "seen: what was said?" in done.stdout
