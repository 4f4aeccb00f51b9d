"""`soulacy run` stopped mid-tool (Ctrl-C, or `soulacy runs cancel` from another process): the
next `soulacy run` of that conversation is one the model API takes.

The model is the local Chat Completions double (tests/_support/openai_server.py) on 127.0.0.1,
configured as an ``openai`` provider: like the real API, it refuses (400) a request in which an
assistant's tool call has no tool result. The processes reach it while this test's Trio loop
serves it, so every wait here is asynchronous.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from _support.openai_server import FakeOpenAI, serve_asgi, text, tool_calls

from soulacy.testing import Workspace

pytestmark = pytest.mark.processes

CUT = "cancelled: the run ended ({}) while this tool call was running; its effect is unknown"
NOT_RUN = "not run: the run ended ({}) before this tool call started"

TOOLS_PY = '''
import os, time
from pathlib import Path


def slow(name: str) -> str:
    """Marks that it started, then takes SOULACY_TEST_SLOW seconds."""
    Path(os.environ["SOULACY_TEST_MARKS"], name).write_text("")
    time.sleep(float(os.environ.get("SOULACY_TEST_SLOW", "0")))
    return f"{name} done"
'''


@pytest.fixture
async def model(nursery: trio.Nursery) -> AsyncIterator[FakeOpenAI]:
    server = FakeOpenAI()
    url, shutdown = await serve_asgi(nursery, server.app)
    server.base_url = url + "/v1"
    yield server
    shutdown.set()


@pytest.fixture
def marks(workspace: Workspace, model: FakeOpenAI) -> Path:
    """Agent ``a`` on the double, with the tool ``slow``; the folder its calls mark."""
    workspace.write_config(
        {
            "leases": {"ttl": "2s", "heartbeat": "200ms", "cancel_poll": "100ms"},
            "llm": {
                "providers": {
                    "model": {
                        "type": "openai",
                        "base_url": model.base_url,
                        "api_key": "sk-test",
                        "model": "fake",
                        "max_retries": 0,
                    }
                }
            },
        }
    )
    workspace.write_agent("a", {"llm": {"provider": "model"}, "tools": ["tools.py:slow"]})
    (workspace.path / "agents" / "a" / "tools.py").write_text(TOOLS_PY)
    folder = workspace.path / "marks"
    folder.mkdir()
    # The first run's reply: two calls; the first blocks, the second never starts.
    model.answers.append(
        tool_calls(
            ("c1", "slow", '{"name": "first"}'),
            ("c2", "slow", '{"name": "second"}'),
        )
    )
    return folder


def command(workspace: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path), *args]


def environment(marks: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    return {**clean, "SOULACY_TEST_MARKS": str(marks), "SOULACY_TEST_SLOW": "60"}


async def soulacy(
    workspace: Workspace, marks: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return await trio.to_thread.run_sync(
        lambda: subprocess.run(
            command(workspace, *args),
            env=environment(marks),
            capture_output=True,
            text=True,
            timeout=120,
        )
    )


def spawn(workspace: Workspace, marks: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(workspace, *args),
        env=environment(marks),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def start_mid_tool(workspace: Workspace, marks: Path) -> subprocess.Popen[str]:
    """`soulacy run a go --run-id R1 --session S`, once its first tool call is running."""
    proc = spawn(workspace, marks, "run", "a", "go", "--run-id", "R1", "--session", "S")
    with trio.move_on_after(60) as waited:
        while not (marks / "first").exists():
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"the run exited early:\n{out}\n{err}")
            await trio.sleep(0.02)
    if waited.cancelled_caught:
        proc.kill()
        proc.communicate()
        raise AssertionError("the run never reached its tool call")
    return proc


async def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return await trio.to_thread.run_sync(lambda: proc.communicate(timeout=30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


async def check_the_conversation_goes_on(
    workspace: Workspace, marks: Path, model: FakeOpenAI, reason: str
) -> None:
    model.answers.append(text("The download was cancelled."))
    after = await soulacy(workspace, marks, "run", "a", "and now?", "--session", "S", "--json")
    assert model.refused == [], model.refused
    assert after.returncode == 0, after.stdout + after.stderr
    reply = json.loads(after.stdout)
    assert reply["metadata"]["status"] == "completed"
    assert reply["reply"] == "The download was cancelled."
    sent = model.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:4]] == [
        ("c1", CUT.format(reason)),
        ("c2", NOT_RUN.format(reason)),
    ]

    shown = await soulacy(workspace, marks, "history", "S", "--json")
    assert shown.returncode == 0, shown.stderr
    entries: list[dict[str, Any]] = json.loads(shown.stdout)
    cancelled = [e for e in entries if e["run_id"] == "R1"]
    assert [(e["role"], e["tool_call_id"], e["content"], e["is_error"]) for e in cancelled] == [
        ("user", None, "go", False),
        ("assistant", None, "", False),
        ("tool", "c1", CUT.format(reason), True),
        ("tool", "c2", NOT_RUN.format(reason), True),
    ]
    assert {e["metadata"]["status"] for e in cancelled} == {"cancelled"}
    assert not (marks / "second").exists()


async def test_ctrl_c_mid_tool_leaves_the_call_answered_and_the_next_run_goes_on(
    workspace: Workspace, marks: Path, model: FakeOpenAI
) -> None:
    proc = await start_mid_tool(workspace, marks)
    proc.send_signal(signal.SIGINT)
    out, err = await finish(proc)
    assert proc.returncode == 130, err
    assert "status: cancelled (interrupted)" in out
    await check_the_conversation_goes_on(workspace, marks, model, "interrupted")


async def test_a_cancel_from_another_process_mid_tool_leaves_the_call_answered(
    workspace: Workspace, marks: Path, model: FakeOpenAI
) -> None:
    proc = await start_mid_tool(workspace, marks)
    try:
        asked = await soulacy(workspace, marks, "runs", "cancel", "R1", "--reason", "not needed")
    except BaseException:
        proc.kill()
        raise
    assert asked.returncode == 0, asked.stderr
    out, err = await finish(proc)
    assert "status: cancelled (not needed)" in out, err
    await check_the_conversation_goes_on(workspace, marks, model, "not needed")
