"""``soulacy build SPEC.yaml``: progress on stderr, a summary or JSON on stdout, and the exit
code says how the build ended (0 completed, 3 incomplete, 1 failed, 2 bad input)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import pytest
from ruamel.yaml import YAML
from studio_support import fenced, soul

from soulacy.cli import main
from soulacy.testing import Workspace

ENVIRON = {"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"}
SPEC = """\
id: reporter
goal: Write a daily report
checks:
  - input: Write today's report
    expect:
      - {target: reply, op: contains, value: report}
"""


@attrs.frozen
class Cli:
    code: int
    out: str
    err: str


def setup(workspace: Workspace, replies: Sequence[str], studio: str = "") -> Path:
    """A workspace whose builder is the scripted model playing ``replies``; returns the spec."""
    workspace.write_config(
        "llm:\n"
        "  default: {provider: builder}\n"
        "  providers:\n"
        "    builder: {type: scripted, options: {script: builder.yaml}}\n" + studio
    )
    with (workspace.path / "builder.yaml").open("w", encoding="utf-8") as fh:
        YAML(typ="safe", pure=True).dump({"steps": [{"text": r} for r in replies]}, fh)
    folder = workspace.path / "agents" / "reporter"
    folder.mkdir(parents=True)
    (folder / "good.yaml").write_text("steps: [{text: the daily report}]\nrepeat: true\n")
    spec = workspace.path / "reporter.build.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return spec


@pytest.fixture
def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Cli]:
    def run(*args: str) -> Cli:
        code = main(["-w", str(workspace.path), *args], environ=ENVIRON)
        captured = capsys.readouterr()
        return Cli(code, captured.out, captured.err)

    return run


def test_a_completed_build(workspace: Workspace, cli: Callable[..., Cli]) -> None:
    spec = setup(workspace, [fenced("id: reporter\nbogus: 1\n"), fenced(soul(max_turns="20"))])
    done = cli("build", str(spec))

    assert done.code == 0, done
    assert done.err.splitlines() == ["attempt 1: 1 problem", "attempt 2: valid, checks 1/1 passed"]
    lines = done.out.splitlines()
    assert lines[0] == "build of agent 'reporter' (new): completed after 2 attempts"
    assert lines[1] == f"saved: {workspace.path / 'agents' / 'reporter' / 'SOUL.yaml'}"
    assert lines[2] == "removed limits the model embedded: max_turns"
    assert lines[3].startswith("tokens: ")
    assert " · cost: unknown · elapsed: " in lines[3]
    assert lines[4] == (
        "allowances: attempts 32 (default) · tokens unlimited (default)"
        " · cost unlimited (default) · elapsed 48h (default)"
    )


def test_json_output(workspace: Workspace, cli: Callable[..., Cli]) -> None:
    spec = setup(workspace, [fenced(soul())])
    done = cli("build", str(spec), "--json")

    assert (done.code, done.err) == (0, "")
    data = json.loads(done.out)
    assert (data["status"], data["reason"], data["attempts"]) == ("completed", None, 1)
    assert data["path"] == str(workspace.path / "agents" / "reporter" / "SOUL.yaml")
    assert data["checks"][0]["passed"] is True
    assert set(data["tokens"]) == {"input", "output", "total"}


def test_an_incomplete_build_exits_3(workspace: Workspace, cli: Callable[..., Cli]) -> None:
    studio = "  studio: {max_build_attempts: 2}\n"
    spec = setup(workspace, [fenced("id: reporter\nbogus: 1\n")] * 2, studio)
    done = cli("build", str(spec))

    assert done.code == 3, done
    assert done.out.splitlines()[:3] == [
        "build of agent 'reporter' (new): incomplete (max_build_attempts) after 2 attempts;"
        " nothing was saved",
        "problems of the last attempt:",
        "  - SOUL.yaml:2:1: bogus: unknown key (got 1)",
    ]
    assert "allowances: attempts 2 (config.yaml)" in done.out


def test_a_failed_build_exits_1(workspace: Workspace, cli: Callable[..., Cli]) -> None:
    spec = setup(workspace, [fenced(soul())])
    workspace.write_agent("reporter", soul(max_turns="-3"))
    done = cli("build", str(spec))
    assert done.code == 1, done
    assert "failed (explicit_limit_invalid) after 0 attempts; nothing was saved" in done.out


def test_a_bad_spec_exits_2(workspace: Workspace, cli: Callable[..., Cli]) -> None:
    spec = setup(workspace, [fenced(soul())])
    spec.write_text("id: reporter\nlimits: {max_steps: 3}\nchecks: [{expect: []}]\n")
    done = cli("build", str(spec))

    assert done.code == 2
    assert f"{spec}:3:10: checks.0.input: required key is missing" in done.err
    spec.write_text("id: reporter\ngoal: g\nlimits: {max_steps: 3}\n")
    done = cli("build", str(spec))
    assert done.code == 2
    assert "limits.max_steps: not an execution limit" in done.err
    assert cli("build", str(spec.with_name("missing.yaml"))).code == 2


def test_the_launcher_has_the_build_command(
    workspace: Workspace, soulacy_cli: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    spec = setup(workspace, [fenced(soul())])
    done = soulacy_cli(
        ["-w", str(workspace.path), "build", str(spec), "--json"], cwd=workspace.path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
