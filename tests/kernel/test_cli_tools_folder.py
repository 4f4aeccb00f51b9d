"""Under `soulacy run`, `demo` and `serve`, tools run in the workspace's folder, wherever the
command was started (issue 38, observation 9; docs/running.md#tools)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace

TOOLS = '''\
from pathlib import Path


def read_note() -> str:
    """Read notes.txt, a path relative to the working folder."""
    return Path("notes.txt").read_text(encoding="utf-8").strip()
'''


def _note_reader(workspace: Workspace) -> None:
    path = workspace.scripted_agent(
        "reader",
        [{"tool": "read_note", "arguments": {}, "id": "c1"}, {"text": "read it"}],
        tools=["tools.py:read_note"],
    )
    (path.parent / "tools.py").write_text(TOOLS, encoding="utf-8")
    (workspace.path / "notes.txt").write_text("the note of the workspace\n", encoding="utf-8")


def test_a_tool_reads_a_relative_path_from_the_workspace_wherever_run_is_started(
    workspace: Workspace, tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    _note_reader(workspace)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("the note of the caller's folder\n", encoding="utf-8")
    done = soulacy_cli(
        ["-w", str(workspace.path), "run", "reader", "read the note", "--json"], cwd=elsewhere
    )
    assert done.returncode == 0, done.stderr
    history = soulacy_cli(
        ["-w", str(workspace.path), "history", json.loads(done.stdout)["metadata"]["session_id"]],
        cwd=elsewhere,
    )
    assert "tool: the note of the workspace" in history.stdout, history.stdout


def test_the_callers_folder_is_given_back_when_the_command_ends(
    workspace: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _note_reader(workspace)
    monkeypatch.chdir(tmp_path)
    code = main(["-w", str(workspace.path), "run", "reader", "read the note"], environ={})
    assert code == 0, capsys.readouterr().err
    assert "the note of the workspace" in capsys.readouterr().out
    assert Path(os.getcwd()) == tmp_path, "the command changed the caller's folder for good"
