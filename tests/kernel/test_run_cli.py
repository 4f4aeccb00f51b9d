"""`soulacy demo` (the README's first command) and `soulacy run`, as a person runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from soulacy.testing import Workspace

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_real_tool_calls_on_embedded_defaults(
    tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    result = soulacy_cli(["demo"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert 'add({"numbers": [19, 23]}) -> 42' in out
    assert 'add({"numbers": [42, 58]}) -> 100' in out
    assert "19 + 23 + 58 = 100, checked with the check tool." in out
    assert "status: completed · verification: unverified" in out
    assert "max_turns: 256 (default)" in out
    assert "run_timeout: 48h (default)" in out


def test_demo_json_reports_metadata_and_limits(
    tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    result = soulacy_cli(["demo", "--json", "--keep", str(tmp_path / "ws")], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["metadata"]["status"] == "completed"
    assert data["metadata"]["tool_calls"] == 3
    assert data["limits"]["max_turns"]["source"] == "default"
    assert (tmp_path / "ws" / "agents" / "demo" / "SOUL.yaml").is_file()


def test_run_prints_the_reply_and_exits_by_status(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    workspace.scripted_agent("a", [{"text": "hello there"}])
    result = soulacy_cli(["run", "a", "hi", "--json", "--session", "s1"], cwd=workspace.path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["reply"], data["metadata"]["session_id"]) == ("hello there", "s1")
    workspace.scripted_agent("b", [{"tool": "x"}], repeat=True, max_turns=2)
    result = soulacy_cli(["run", "b", "loop"], cwd=workspace.path)
    assert result.returncode == 3  # incomplete
    assert "status: incomplete (max_turns)" in result.stdout


def test_run_of_an_unknown_agent_is_a_usage_error(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    result = soulacy_cli(["run", "ghost", "hi"], cwd=workspace.path)
    assert result.returncode == 2
    assert result.stderr.startswith("soulacy: error: no agent 'ghost' in workspace")


def test_the_engine_benchmark_smoke_run_checks_its_counts() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "engine_turns.py"), "--one", "20"],
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(out.stdout)
    assert data["turns"] == 20
    assert data["us_per_turn"] > 0


def test_every_run_status_has_its_own_exit_code() -> None:
    """A status the engine can end a run with and ``run`` / ``demo`` cannot map would be a
    KeyError after the run: a new status fails here until it has a code (docs/cli.md)."""
    from typing import get_args

    from soulacy.kernel.engine import Status
    from soulacy.plugins.core._run import RUN_EXIT_CODES

    assert set(RUN_EXIT_CODES) == set(get_args(Status))
    assert RUN_EXIT_CODES["completed"] == 0
    assert RUN_EXIT_CODES["interrupted"] == 75  # EX_TEMPFAIL: the kernel stopped; try again
    others = [code for status, code in RUN_EXIT_CODES.items() if status != "completed"]
    assert len(set(others)) == len(others), RUN_EXIT_CODES
    assert not set(others) & {0, 2, 130, 143}, "usage errors and signals have their own codes"
