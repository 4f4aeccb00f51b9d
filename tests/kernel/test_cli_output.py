"""What the commands show of what happened (issue 38, observation 10): `run` shows each tool call
as it happens, as `demo` does; `runs` and `runs show` give readable times; a reader that goes
away (`soulacy run … | head -1`) ends the command quietly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from soulacy.testing import Workspace

TOOLS = '''\
def add(numbers: list[float]) -> float:
    """Add up numbers."""
    return sum(numbers)


def fetch(url: str) -> str:
    """Fetch a page."""
    raise ConnectionError(f"no route to {url}")
'''


def _adder(workspace: Workspace) -> None:
    path = workspace.scripted_agent(
        "adder",
        [
            {"tool": "add", "arguments": {"numbers": [19, 23]}, "id": "c1"},
            {"tool": "fetch", "arguments": {"url": "http://example.invalid"}, "id": "c2"},
            {"text": "42, and the page did not load"},
        ],
        tools=["tools.py:add", "tools.py:fetch"],
    )
    (path.parent / "tools.py").write_text(TOOLS, encoding="utf-8")


def test_run_shows_each_tool_call_and_its_result_before_the_reply(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    _adder(workspace)
    done = soulacy_cli(["run", "adder", "add them"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        '→ add({"numbers": [19, 23]}) -> 42',
        '→ fetch({"url": "http://example.invalid"}) -> error: ConnectionError: no route to'
        " http://example.invalid",
        "42, and the page did not load",
    ], done.stdout


def test_run_json_prints_json_only(workspace: Workspace, soulacy_cli: Callable[..., Any]) -> None:
    _adder(workspace)
    done = soulacy_cli(["run", "adder", "add them", "--json"], cwd=workspace.path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["tool_calls"] == 2


def test_runs_lists_when_each_run_started(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    _adder(workspace)
    assert soulacy_cli(["run", "adder", "x", "--run-id", "R1"], cwd=workspace.path).returncode == 0
    listing = soulacy_cli(["runs"], cwd=workspace.path)
    assert listing.returncode == 0, listing.stderr
    started = re.match(
        r"R1  adder  session \S+  completed  unverified  (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\n",
        listing.stdout,
    )
    assert started, f"expected the start time after the verification, got {listing.stdout!r}"
    ago = datetime.now() - datetime.fromisoformat(started[1])
    assert abs(ago.total_seconds()) < 120, f"expected the local time of the run, got {started[1]}"


def test_runs_show_gives_its_times_as_dates(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    _adder(workspace)
    assert soulacy_cli(["run", "adder", "x", "--run-id", "R1"], cwd=workspace.path).returncode == 0
    shown = soulacy_cli(["runs", "show", "R1"], cwd=workspace.path)
    assert shown.returncode == 0, shown.stderr
    for key in ("started_at", "finished_at"):
        line = next(x for x in shown.stdout.splitlines() if x.strip().startswith(f"{key}:"))
        assert re.fullmatch(
            rf"  {key}: \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? [+-]\d{{4}}", line
        ), line


def test_a_reader_that_goes_away_ends_run_quietly(workspace: Workspace) -> None:
    workspace.scripted_agent("a", [{"text": "hello"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", "run", "a", "hi"],
        cwd=workspace.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.close()  # `| head -0`: gone before the first line
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (0, ""), err


def test_demo_shows_its_tool_calls_as_run_does(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    done = subprocess.run(
        [sys.executable, "-m", "soulacy.cli", "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '→ add({"numbers": [19, 23]}) -> 42\n→ add({"numbers": [42, 58]}) -> 100' in done.stdout
