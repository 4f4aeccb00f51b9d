"""The launcher's habits a newcomer meets first: version, help, usage errors, stdin, empty lists,
typos in -p, and negative values."""

from __future__ import annotations

import importlib.metadata
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace


@pytest.fixture
def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--workspace", str(workspace.path), *args], environ={})
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_version_prints_the_installed_version(
    tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    result = soulacy_cli(["--version"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"soulacy {importlib.metadata.version('soulacy')}")
    assert not list(tmp_path.iterdir())  # nothing loaded, nothing written


def test_soulacy_alone_prints_the_help_and_exits_0(
    tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    result = soulacy_cli([], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: soulacy ")
    assert "COMMAND" in result.stdout
    assert "demo" in result.stdout
    assert result.stderr == ""


def test_a_group_alone_prints_its_help(cli: Callable[..., Any]) -> None:
    code, out, err = cli("config")
    assert (code, err) == (0, "")
    assert out.startswith("usage: soulacy config ")
    assert "validate" in out


def test_an_unknown_option_of_a_subcommand_shows_that_subcommands_usage(
    cli: Callable[..., Any],
) -> None:
    code, _out, err = cli("run", "a", "hi", "--bogus")
    assert code == 2
    assert err.startswith("usage: soulacy run ")
    assert "soulacy run: error: unrecognized arguments: --bogus" in err
    code, _out, err = cli("run", "--bogus")  # argparse first says what is missing
    assert code == 2
    assert err.startswith("usage: soulacy run ")


def test_a_global_option_after_the_command_says_where_it_goes(cli: Callable[..., Any]) -> None:
    code, _out, err = cli("agents", "list", "-p", "no:policy")
    assert code == 2
    assert "global options (-w, -p, --debug) go before the command" in err


def test_run_reads_the_request_from_stdin_given_a_dash(
    workspace: Workspace, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.scripted_agent("a", [{"text": "ok"}])
    monkeypatch.setattr("sys.stdin", io.StringIO("a request\nof two lines\n"))
    code, out, err = cli("run", "a", "-", "--json", "--session", "s1")
    assert code == 0, err
    assert json.loads(out)["reply"] == "ok"
    code, out, _ = cli("history", "s1", "--json")
    assert json.loads(out)[0]["content"] == "a request\nof two lines"


def test_run_with_a_dash_and_empty_stdin_is_a_usage_error(
    workspace: Workspace, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.scripted_agent("a", [{"text": "ok"}])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _out, err = cli("run", "a", "-")
    assert code == 2
    assert err == "soulacy: error: no request on standard input (TEXT is '-')\n"


def test_empty_lists_say_so(workspace: Workspace, cli: Callable[..., Any]) -> None:
    workspace.write_config("")
    code, out, _ = cli("agents", "list")
    assert code == 0
    assert out.startswith("no agents in ")
    assert "soulacy agents new ID" in out
    code, out, _ = cli("runs")
    assert code == 0
    assert out.startswith("no runs (store: ")


def test_disabling_an_unknown_plugin_warns_with_a_suggestion(cli: Callable[..., Any]) -> None:
    code, _out, err = cli("-p", "no:polcy", "-p", "no:typo", "plugins")
    assert code == 0
    assert (
        "soulacy: warning: -p no:polcy: no plugin named 'polcy' to disable; did you mean 'policy'?"
        in err
    )
    assert "soulacy: warning: -p no:typo: no plugin named 'typo' to disable; known: core," in err


def test_a_key_of_a_disabled_plugin_says_its_owner_is_disabled(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("store:\n  busy_timeout: 10s\nloopguard:\n  max_repeats: 3\n")
    code, _out, err = cli("-p", "no:sqlite_store", "-p", "no:loopguard", "config", "validate")
    assert code == 2
    assert "unknown key" not in err
    assert (
        "store: this key belongs to the plugin 'sqlite_store', which is disabled"
        " (-p no:sqlite_store)" in err
    )
    assert "loopguard: this key belongs to the plugin 'loopguard', which is disabled" in err


def test_config_set_takes_a_negative_value_without_dashes(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config("runtime:\n  default_max_turns: 20\n")
    before = path.read_bytes()
    code, _out, err = cli("config", "set", "runtime.default_max_turns", "-4")
    assert code == 2
    assert "expected 0 or more" in err
    code, _out, err = cli("config", "set", "runtime.timeouts.tool", "-5s")
    assert code == 2
    assert err.startswith("soulacy: error: invalid configuration: ")  # the value's own error
    assert "runtime.timeouts.tool" in err
    assert "the following arguments are required" not in err
    assert path.read_bytes() == before
    code, _out, err = cli("config", "set", "runtime.default_max_turns", "1", "2")
    assert code == 2
    assert "config set takes one VALUE" in err
