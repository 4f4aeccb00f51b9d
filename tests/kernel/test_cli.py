"""The soulacy launcher: config commands edit files safely; bad input is one clear paragraph."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from soulacy.cli import main
from soulacy.testing import Workspace

CONFIG = """\
# Workspace settings, kept by hand.
runtime:
  default_max_turns: 20     # an old default, kept on purpose
  timeouts:
    run: "48h"              # quoted on purpose
costs:
  default_max_output_tokens: 4096
"""


@pytest.fixture
def cli(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> Callable[..., Any]:
    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--workspace", str(workspace.path), *args], environ={})
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_config_set_changes_only_the_changed_line(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config(CONFIG)
    code, out, _ = cli("config", "set", "runtime.timeouts.run", "24h")
    assert code == 0, out
    before, after = CONFIG.splitlines(), path.read_text().splitlines()
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert changed == [
        (
            '    run: "48h"              # quoted on purpose',
            '    run: "24h"              # quoted on purpose',
        )
    ]


def test_config_set_adds_a_missing_key_and_keeps_everything_else(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config(CONFIG)
    code, _, err = cli("config", "set", "runtime.max_turns_ceiling", "50")
    assert code == 0, err
    text = path.read_text()
    assert "  max_turns_ceiling: 50\n" in text
    assert [line for line in text.splitlines() if "max_turns_ceiling" not in line] == (
        CONFIG.splitlines()
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("runtime.default_max_turns", "many", "runtime.default_max_turns: expected an integer"),
        ("runtime.defualt_max_turns", "5", "did you mean 'default_max_turns'?"),
        ("runtime.timeouts.run", "5x", "expected a duration"),
        ("runtime.timeouts.http", "1h", "the HTTP timeout cannot accommodate the run timeout"),
        ("runtime.default_max_turns", "-4", "expected 0 or more (0 means unlimited)"),
    ],
)
def test_an_invalid_value_leaves_the_file_byte_for_byte_untouched(
    workspace: Workspace, cli: Callable[..., Any], key: str, value: str, message: str
) -> None:
    path = workspace.write_config(CONFIG)
    before = path.read_bytes()
    code, _out, err = cli("config", "set", key, value)
    assert code == 2
    assert message in err
    assert err.startswith("soulacy: error: invalid configuration: ")
    assert "Traceback" not in err
    assert path.read_bytes() == before
    assert not list(path.parent.glob(".config.yaml.*"))  # no temporary file left behind


def test_config_set_of_the_saved_value_changes_nothing(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    path = workspace.write_config(CONFIG)
    before = path.read_bytes()
    code, out, _ = cli("config", "set", "runtime.default_max_turns", "20")
    assert code == 0
    assert "unchanged" in out
    assert path.read_bytes() == before


def test_config_get_and_show_report_values_and_sources(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config(CONFIG)
    code, out, _ = cli("config", "get", "runtime.default_max_turns")
    assert (code, out) == (0, "20\n")
    code, out, _ = cli("config", "get", "runtime.timeouts.http", "--json")
    assert json.loads(out) == {
        "key": "runtime.timeouts.http",
        "value": "48h1m",
        "source": "default",
    }
    code, out, _ = cli("config", "show", "--json")
    shown = json.loads(out)
    assert shown["config"]["runtime"]["default_max_turns"] == 20
    assert shown["config"]["runtime"]["max_turns_ceiling"] == 0
    assert shown["sources"]["runtime.default_max_turns"].endswith("config.yaml:3:3")
    assert "runtime.max_turns_ceiling" not in shown["sources"]


def test_config_get_of_an_unknown_key_is_a_usage_error(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    code, _, err = cli("config", "get", "runtime.nope")
    assert code == 2
    assert err == "soulacy: error: unknown configuration key 'runtime.nope'\n"


def test_config_validate_reports_every_problem_in_one_run(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("runtime:\n  default_max_turns: x\ncosts:\n  nope: 1\n")
    workspace.write_agent("bot", "max_turns: -5\n")
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "(2 problems)" in err
    workspace.write_config("")
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "SOUL.yaml:1:1: max_turns: expected -1 or more" in err
    workspace.write_agent("bot", "max_turns: -1\n")
    code, out, _ = cli("config", "validate")
    assert code == 0
    assert "1 agent file(s) are valid" in out


def test_debug_shows_the_traceback(workspace: Workspace, cli: Callable[..., Any]) -> None:
    workspace.write_config("runtime: [\n")
    code, _, err = cli("config", "show")
    assert code == 2
    assert "Traceback" not in err
    assert err.count("\n") == 1  # one paragraph
    code, _, err = cli("--debug", "config", "show")
    assert code == 2
    assert "Traceback" in err


def test_the_real_launcher_exits_2_on_bad_input(
    workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    workspace.write_config("plugins:\n  enable: [no_such_plugin_mod]\n")
    result = soulacy_cli(["plugins"], cwd=workspace.path)
    assert result.returncode == 2
    assert result.stderr == (
        "soulacy: error: plugin 'no_such_plugin_mod' (config.yaml, module no_such_plugin_mod)"
        " failed to import: ModuleNotFoundError: No module named 'no_such_plugin_mod'\n"
    )


def test_secrets_are_not_printed(workspace: Workspace, cli: Callable[..., Any]) -> None:
    workspace.write_config(
        "llm:\n  providers:\n    p:\n      type: openai\n      api_key: sk-very-secret\n"
    )
    code, out, _ = cli("config", "show")
    assert code == 0
    assert "sk-very-secret" not in out
    assert "api_key: '***'" in out
    code, out, _ = cli("config", "get", "llm.providers.p.api_key")
    assert (code, out) == (0, "***\n")


def test_an_unknown_provider_type_is_a_config_error(
    workspace: Workspace, cli: Callable[..., Any]
) -> None:
    workspace.write_config("llm:\n  providers:\n    p:\n      type: nonsense\n")
    code, _, err = cli("config", "validate")
    assert code == 2
    assert "llm.providers.p.type: no loaded plugin provides this provider type" in err


def test_plugins_can_be_disabled_from_the_environment(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"SOULACY_PLUGINS__DISABLE": "[progress]"}
    code = main(["--workspace", str(workspace.path), "plugins", "--json"], environ=env)
    names = [p["name"] for p in json.loads(capsys.readouterr().out)]
    assert code == 0
    assert "progress" not in names


def test_a_plugin_can_add_a_subcommand_under_another_plugins_command(
    workspace: Workspace,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "extend_mod.py").write_text(
        "from soulacy.kernel import CliCommand\n"
        "def soulacy_cli_commands():\n"
        "    return [CliCommand('plugins hello', 'x', lambda args, ctx: ctx.print('hello') or 7)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    base = ["--workspace", str(workspace.path), "-p", "extend_mod"]
    assert main([*base, "plugins", "hello"], environ={}) == 7
    assert capsys.readouterr().out == "hello\n"
    assert main([*base, "plugins", "--json"], environ={}) == 0  # the bare command still works
    assert "extend_mod" in capsys.readouterr().out


def test_plugin_new_renders_the_template(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], workspace: Workspace
) -> None:
    dest = tmp_path / "soulacy-acme"
    code = main(
        ["--workspace", str(workspace.path), "plugin", "new", "acme", "--dest", str(dest)],
        environ={},
    )
    assert code == 0, capsys.readouterr().err
    assert (dest / "src" / "soulacy_acme" / "__init__.py").is_file()
    assert 'acme = "soulacy_acme"' in (dest / "pyproject.toml").read_text()
    assert (
        main(
            ["--workspace", str(workspace.path), "plugin", "new", "acme", "--dest", str(dest)],
            environ={},
        )
        == 2
    )  # never overwrites
