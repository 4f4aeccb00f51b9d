"""``soulacy runs continue RUN``: an incomplete run goes on in place from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from soulacy.testing import Workspace

TOOLS = '''\
from pathlib import Path


def count(n: int) -> str:
    """Count: each execution adds a line to counted.txt."""
    with Path("counted.txt").open("a", encoding="utf-8") as out:
        out.write(f"{n}\\n")
    return f"counted {n}"
'''


def test_runs_continue_goes_on_where_the_run_stopped(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    path = workspace.scripted_agent(
        "a",
        [
            {"tool": "count", "arguments": {"n": 1}, "id": "c1"},
            {"tool": "count", "arguments": {"n": 2}, "id": "c2"},
            {"text": "counted"},
        ],
        tools=["tools.py:count"],
        max_turns=1,
    )
    (path.parent / "tools.py").write_text(TOOLS, encoding="utf-8")
    script = path.parent / "script.yaml"
    script.write_text(script.read_text() + "start: conversation\n")
    where = ["-w", str(workspace.path)]

    first = soulacy_cli([*where, "run", "a", "go", "--run-id", "R", "--json"], cwd=workspace.path)
    assert first.returncode == 3, first.stderr  # incomplete
    assert json.loads(first.stdout)["metadata"]["incomplete_reason"] == "max_turns"

    went_on = soulacy_cli(
        [*where, "runs", "continue", "R", "--max-turns", "5", "--json"], cwd=workspace.path
    )
    assert went_on.returncode == 0, went_on.stderr
    done = json.loads(went_on.stdout)
    meta = done["metadata"]
    assert (meta["run_id"], done["reply"], meta["attempt"]) == ("R", "counted", 2)
    assert (workspace.path / "counted.txt").read_text().split() == ["1", "2"]  # each once

    again = soulacy_cli([*where, "runs", "continue", "R"], cwd=workspace.path)
    assert again.returncode == 2
    assert "run 'R' is completed: only a run that ended incomplete continues" in again.stderr
    assert "Traceback" not in again.stderr
