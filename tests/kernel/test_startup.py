"""Start-up: `soulacy --help` is answered from the commands' declarations (decision 0036), and
builtin plugin packages keep their top level light (decision 0038).

Nothing here is timed (the figures are bench/startup.py's, in docs/benchmarks.md): each test
runs the launcher in a fresh interpreter and looks at what it imported.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from soulacy.cli import _launcher
from soulacy.kernel import BUILTIN_PLUGINS, CliCommand, PluginError, SoulacyPluginManager, _kernel
from soulacy.kernel._manager import COMMAND_PLUGINS, ESSENTIAL_PLUGINS, may_have_entry_points

HEAVY = ("trio", "httpx")
# What `soulacy --help` does not need either: attrs, and the configuration's machinery.
NOT_FOR_HELP = ("attrs", "cattrs", "ruamel.yaml", "soulacy.kernel._config")
# What a command needs to run; none of it is needed to list the commands.
RUNTIME = (
    "soulacy.kernel._kernel",
    "soulacy.plugins.engine._engine",
    "soulacy.kernel._config",
    "soulacy.plugins.core._commands",
    "soulacy.plugins.core._run",
    "soulacy.plugins.studio._cli",
)


def launched(tmp_path: Path, *argv: str) -> dict[str, object]:
    """Run ``soulacy ARGV`` in a fresh interpreter (cwd: an empty folder); what it imported."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from soulacy.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = main({list(argv)!r}, environ={{}})\n"
        "print(json.dumps({'code': code, 'out': out.getvalue(), 'modules': sorted(sys.modules)}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def imported_plugins(modules: set[str]) -> set[str]:
    return {name for name, module in BUILTIN_PLUGINS if module in modules}


def test_help_lists_every_command_and_loads_only_the_plugins_that_declare_commands(
    tmp_path: Path,
) -> None:
    result = launched(tmp_path, "--help")
    assert result["code"] == 0
    out = str(result["out"])
    for command in ("demo", "run", "serve", "plugins", "config", "policy", "build", "schedules"):
        assert f"\n    {command} " in out, command
    modules = set(result["modules"])  # type: ignore[call-overload]
    assert imported_plugins(modules) <= COMMAND_PLUGINS | ESSENTIAL_PLUGINS
    assert not modules & set(RUNTIME), "what the commands do is imported when one runs"
    assert "importlib.metadata" not in modules  # no installed plugin declares the group here


def test_a_subcommands_help_imports_its_arguments_only(tmp_path: Path) -> None:
    result = launched(tmp_path, "demo", "--help")
    assert result["code"] == 0
    assert str(result["out"]).startswith("usage: soulacy demo ")
    assert "--keep DIR" in str(result["out"])
    assert not set(result["modules"]) & set(RUNTIME)  # type: ignore[call-overload]


def test_help_imports_neither_trio_nor_httpx(tmp_path: Path) -> None:
    modules = set(launched(tmp_path, "--help")["modules"])  # type: ignore[call-overload]
    assert not modules & set(HEAVY)


def test_help_imports_neither_attrs_nor_the_configuration(tmp_path: Path) -> None:
    modules = set(launched(tmp_path, "--help")["modules"])  # type: ignore[call-overload]
    assert not modules & set(NOT_FOR_HELP)


def test_registering_every_builtin_imports_neither_trio_nor_httpx() -> None:
    probe = (
        "import json, sys\n"
        "from soulacy.kernel import SoulacyPluginManager\n"
        "pm = SoulacyPluginManager()\n"
        "pm.load_builtins()\n"
        "pm.load_builtins(fallbacks=True)\n"
        "pm.check_unknown_hooks()\n"
        "pm.describe()\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert {name for name, _ in BUILTIN_PLUGINS} <= {
        name for name, module in BUILTIN_PLUGINS if module in modules
    }
    assert not modules & {*HEAVY, "soulacy.kernel._kernel", "soulacy.plugins.engine._engine"}


def test_plugins_imports_neither_trio_nor_httpx(tmp_path: Path) -> None:
    result = launched(tmp_path, "plugins")
    assert result["code"] == 0
    assert "classic" in str(result["out"])  # every builtin listed, none of them loaded a runtime
    modules = set(result["modules"])  # type: ignore[call-overload]
    assert not modules & {*HEAVY, "soulacy.kernel._kernel", "soulacy.plugins.engine._engine"}


def test_command_plugins_are_the_builtins_that_implement_the_command_hook() -> None:
    pm = SoulacyPluginManager()
    pm.load_builtins()
    pm.load_builtins(fallbacks=True)
    declaring = {name for name, _ in pm.plugin_callers("soulacy_cli_commands")}
    assert declaring == COMMAND_PLUGINS


def test_the_declared_commands_are_those_of_every_plugin_loaded(tmp_path: Path) -> None:
    early = argparse.Namespace(workspace=str(tmp_path), plugins=[])
    declared = _launcher.declared_commands(early, environ={})
    assert declared is not None
    loaded = _kernel.load_plugins(tmp_path, environ={}, autoload=False)
    everything = _launcher._collect_commands(loaded.pm)
    assert [c.name for c in declared] == [c.name for c in everything]
    assert _launcher._build_parser(declared).format_help() == (
        _launcher._build_parser(everything).format_help()
    )


def test_a_blocked_plugins_commands_are_not_declared(tmp_path: Path) -> None:
    early = argparse.Namespace(workspace=str(tmp_path), plugins=["no:policy"])
    declared = _launcher.declared_commands(early, environ={})
    assert declared is not None
    assert "policy show" not in {c.name for c in declared}


@pytest.mark.parametrize(
    ("config", "environ"),
    [
        ("plugins:\n  disable: [policy]\n", {}),
        ("runtime:\n  default_max_turns: 5\n", {"SOULACY_PLUGINS__DISABLE": "policy"}),
        ("", {"SOULACY_TRACE_PLUGINS": "1"}),
    ],
)
def test_when_config_may_choose_the_plugins_everything_is_loaded_first(
    tmp_path: Path, config: str, environ: dict[str, str]
) -> None:
    (tmp_path / "config.yaml").write_text(config)
    early = argparse.Namespace(workspace=str(tmp_path), plugins=[])
    assert _launcher.declared_commands(early, environ=environ) is None


def test_a_command_declared_by_name_is_imported_when_it_runs() -> None:
    command = CliCommand("x", "x", "json:dumps", "argparse:ArgumentParser.print_help")
    assert command.runner() is json.dumps
    assert command.configurer() is argparse.ArgumentParser.print_help
    for bad in ("json", "json:no_such_function", "no_such_module_here:f"):
        with pytest.raises(PluginError, match=r"command function|reference"):
            CliCommand("x", "x", bad).runner()


def test_the_launcher_knows_the_kernels_file_layout() -> None:
    assert (_launcher.CONFIG_FILE, _launcher.AGENT_FILE, _launcher.AGENTS_DIR) == (
        _kernel.CONFIG_FILE,
        _kernel.AGENT_FILE,
        _kernel.AGENTS_DIR,
    )


def test_entry_points_are_looked_for_only_where_a_distribution_declares_the_group(
    tmp_path: Path,
) -> None:
    (tmp_path / "other-1.0.dist-info").mkdir()
    (tmp_path / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\n")
    assert not may_have_entry_points([str(tmp_path), str(tmp_path / "missing")])
    (tmp_path / "mine-1.0.dist-info").mkdir()
    (tmp_path / "mine-1.0.dist-info" / "entry_points.txt").write_text("[soulacy]\nmine = m\n")
    assert may_have_entry_points([str(tmp_path)])
    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"")
    assert may_have_entry_points([str(archive)])  # a zip on the path: importlib.metadata reads it


def test_listing_the_commands_configures_only_the_parsers_used(tmp_path: Path) -> None:
    early = argparse.Namespace(workspace=str(tmp_path), plugins=[])
    declared = _launcher.declared_commands(early, environ={})
    assert declared is not None
    parser = _launcher._build_parser(declared)
    help_text = parser.format_help()
    (top,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]

    def configured() -> set[str]:  # a parser whose deferred configuration has run
        return {name for name, sub in top.choices.items() if not sub._pending}

    assert {"config", "runs"} <= set(help_text.split())  # listed by name and help...
    assert configured() == set()  # ...with no command's configure imported or called
    parsed = parser.parse_args(["config", "get", "runtime"])
    assert parsed._command.name == "config get"
    assert configured() == {"config"}
