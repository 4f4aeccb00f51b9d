"""Plugin loading: order, entry points, enabling and blocking, and clear errors."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import ConfigSection, Kernel, PluginError, hookimpl, hookspec
from soulacy.testing import HookRecorder, Workspace, throwaway_plugin

EP_PLUGIN = """
from soulacy.kernel import ConfigSection, hookimpl

@hookimpl
def soulacy_config_sections():
    return [ConfigSection("greeting", str, default="hello")]
"""


def make_distribution(
    root: Path,
    name: str = "soulacy-greeter",
    module: str = "greeter",
    body: str = EP_PLUGIN,
    ep_name: str = "greeter",
) -> Path:
    """A real installed distribution (a dist-info folder with entry_points.txt) on a path."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(body)
    dist = root / f"{name.replace('-', '_')}-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (dist / "entry_points.txt").write_text(f"[soulacy]\n{ep_name} = {module}\n")
    return root


@pytest.fixture
def greeter_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = make_distribution(tmp_path / "site")
    monkeypatch.syspath_prepend(str(path))
    return path


def names(kernel: Kernel) -> list[str]:
    return [info["name"] for info in kernel.pm.describe()]


def test_builtins_load_first_in_the_listed_order(kernel: Kernel) -> None:
    assert names(kernel)[:3] == ["core", "engine", "policy"]


def test_an_entry_point_plugin_is_loaded_with_its_distribution(
    greeter_path: Path, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel(autoload=True)
    info = next(i for i in kernel.pm.describe() if i["name"] == "greeter")
    assert info["origin"] == "entry point"
    assert (info["distribution"], info["version"]) == ("soulacy-greeter", "1.2.3")
    assert info["hooks"] == ["soulacy_config_sections"]
    assert kernel.config.section("greeting") == "hello"


def test_autoload_can_be_switched_off_by_the_environment(
    greeter_path: Path, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = make_kernel(autoload=None, environ={"SOULACY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "greeter" not in names(kernel)
    # ... and -p NAME still loads one entry point by name
    kernel = make_kernel(autoload=False, plugins=["greeter"])
    assert "greeter" in names(kernel)


def test_the_command_line_lists_and_blocks_an_entry_point_plugin(
    greeter_path: Path, workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    run_soulacy = soulacy_cli
    env = {"PYTHONPATH": str(greeter_path)}
    listed = run_soulacy(["plugins", "--json"], cwd=workspace.path, env=env)
    assert listed.returncode == 0, listed.stderr
    by_name = {p["name"]: p for p in json.loads(listed.stdout)}
    assert by_name["greeter"]["distribution"] == "soulacy-greeter"
    assert by_name["greeter"]["origin"] == "entry point"
    blocked = run_soulacy(["-p", "no:greeter", "plugins", "--json"], cwd=workspace.path, env=env)
    assert blocked.returncode == 0, blocked.stderr
    assert "greeter" not in {p["name"] for p in json.loads(blocked.stdout)}


def test_config_disable_blocks_and_the_command_line_wins(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("plugins:\n  disable: [policy]\n")
    assert "policy" not in names(make_kernel())
    assert "policy" in names(make_kernel(plugins=["policy"]))
    # a builtin may also be named by its module
    workspace.write_config("plugins:\n  disable: [soulacy.plugins.policy]\n")
    assert "policy" not in names(make_kernel())


def test_config_enable_and_the_command_line_register_a_module(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workspace: Workspace,
    make_kernel: Callable[..., Kernel],
) -> None:
    (tmp_path / "extra_mod.py").write_text(EP_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    workspace.write_config("plugins:\n  enable: [extra_mod]\n")
    kernel = make_kernel()
    assert kernel.pm.infos["extra_mod"].origin == "config.yaml"
    assert "extra_mod" not in names(make_kernel(plugins=["no:extra_mod"]))


def test_an_essential_plugin_cannot_be_disabled(make_kernel: Callable[..., Kernel]) -> None:
    with pytest.raises(PluginError, match="'core' is essential and cannot be disabled"):
        make_kernel(plugins=["no:core"])


def test_a_plugin_that_fails_to_import_is_named(make_kernel: Callable[..., Kernel]) -> None:
    with pytest.raises(PluginError) as info:
        make_kernel(plugins=["no_such_module_xyz"])
    assert str(info.value) == (
        "plugin 'no_such_module_xyz' (command line, module no_such_module_xyz) failed to import:"
        " ModuleNotFoundError: No module named 'no_such_module_xyz'"
    )


def test_a_broken_entry_point_names_its_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_kernel: Callable[..., Kernel]
) -> None:
    path = make_distribution(
        tmp_path / "bad", "soulacy-broken", "broken", "raise RuntimeError('boom')\n", "broken"
    )
    monkeypatch.syspath_prepend(str(path))
    with pytest.raises(PluginError) as info:
        make_kernel(autoload=True)
    assert str(info.value) == (
        "plugin 'broken' (entry point broken = broken of distribution soulacy-broken 1.2.3)"
        " failed to import: RuntimeError: boom"
    )


def test_an_implementation_of_an_unknown_hook_is_an_error_naming_the_plugin(
    make_kernel: Callable[..., Kernel],
) -> None:
    plugin = throwaway_plugin("typo", soulacy_config_section=lambda: [])
    with pytest.raises(PluginError) as info:
        make_kernel(extra_plugins=[plugin])
    assert str(info.value) == (
        "plugin 'typo' implements unknown hook 'soulacy_config_section';"
        " did you mean 'soulacy_config_sections'?"
    )


def test_an_implementation_with_unknown_arguments_is_an_error(
    make_kernel: Callable[..., Kernel],
) -> None:
    plugin = throwaway_plugin("odd", soulacy_configure=lambda kernel, nonsense: None)
    with pytest.raises(PluginError, match=r"plugin 'odd' .* is invalid: .*nonsense"):
        make_kernel(extra_plugins=[plugin])


def test_two_plugins_claiming_one_section_are_both_named(
    make_kernel: Callable[..., Kernel],
) -> None:
    mine = throwaway_plugin(
        "mine", soulacy_config_sections=lambda: [ConfigSection("runtime", dict)]
    )
    with pytest.raises(PluginError) as info:
        make_kernel(extra_plugins=[mine])
    assert str(info.value) == (
        "plugins 'policy' and 'mine' both claim the workspace config section 'runtime'"
    )


def test_a_section_nested_in_another_plugins_section_conflicts(
    make_kernel: Callable[..., Kernel],
) -> None:
    mine = throwaway_plugin(
        "mine", soulacy_config_sections=lambda: [ConfigSection("runtime.extra", dict)]
    )
    expected = "both claim the workspace config section 'runtime / runtime.extra'"
    with pytest.raises(PluginError, match=re.escape(expected)):
        make_kernel(extra_plugins=[mine])


def test_plugins_can_add_hookspecs_of_their_own(make_kernel: Callable[..., Kernel]) -> None:
    class Specs:
        @hookspec
        def soulacy_greet(self, who: str) -> str:  # type: ignore[empty-body]
            """A hook that the greeter plugin defines for others."""

    class Definer:
        name = "definer"

        @hookimpl
        def soulacy_addhooks(self, pluginmanager: object) -> None:
            pluginmanager.add_hookspecs(Specs)  # type: ignore[attr-defined]

    implementer = throwaway_plugin("implementer", soulacy_greet=lambda who: f"hi {who}")
    kernel = make_kernel(extra_plugins=[Definer(), implementer])
    assert kernel.hook.soulacy_greet(who="ada") == ["hi ada"]


def test_tracing_prints_every_hook_call(
    make_kernel: Callable[..., Kernel], capsys: pytest.CaptureFixture[str]
) -> None:
    make_kernel(trace=True)
    err = capsys.readouterr().err
    assert "soulacy_validate_config" in err
    assert "finish soulacy_configure" in err


def test_the_recorder_sees_hook_calls_with_their_arguments(
    kernel: Kernel, hook_recorder: HookRecorder
) -> None:
    kernel.hook.soulacy_validate_config(kernel=kernel, config=kernel.config)
    call = hook_recorder.assert_called("soulacy_validate_config", kernel=kernel)
    implementers = len(kernel.hook.soulacy_validate_config.get_hookimpls())
    assert call.result == [[]] * implementers
    with pytest.raises(AssertionError, match="was not called"):
        hook_recorder.assert_called("soulacy_services")


# -- first-result precedence (docs/decisions/0018-first-result-precedence.md) -----------------

STORE_PLUGIN = """
from soulacy.kernel import hookimpl
from soulacy.plugins.memory_store import MemoryStore

STORE = MemoryStore()

@hookimpl{marker}
def soulacy_store(kernel):
    return STORE
"""


def installed_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, marker: str = ""
) -> Path:
    """An installed distribution whose plugin answers soulacy_store (a module
    name per test: a module is imported once per process)."""
    body = STORE_PLUGIN.replace("{marker}", marker)
    path = make_distribution(tmp_path / "site", f"soulacy-{module}", module, body, ep_name=module)
    monkeypatch.syspath_prepend(str(path))
    return path


def store_module(kernel: Kernel) -> str:
    return type(kernel.store()).__module__


def test_an_installed_plugin_does_not_outrank_a_builtin_unless_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_kernel: Callable[..., Kernel]
) -> None:
    installed_store(tmp_path, monkeypatch, "memstore_plain")
    kernel = make_kernel(autoload=True)
    assert "memstore_plain" in names(kernel)
    assert store_module(kernel) == "soulacy.plugins.sqlite_store._store"  # the builtin answers
    # ... unless the builtin is disabled, or the plugin is asked for by name
    assert store_module(make_kernel(autoload=True, plugins=["no:sqlite_store"])) == (
        "soulacy.plugins.memory_store._store"
    )
    assert store_module(make_kernel(autoload=True, plugins=["memstore_plain"])) == (
        "soulacy.plugins.memory_store._store"
    )


def test_an_installed_plugin_with_tryfirst_answers_before_the_builtin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_kernel: Callable[..., Kernel]
) -> None:
    installed_store(tmp_path, monkeypatch, "memstore_first", "(tryfirst=True)")
    assert store_module(make_kernel(autoload=True)) == "soulacy.plugins.memory_store._store"


def test_plugins_shows_which_plugin_answers_each_first_result_hook(
    tmp_path: Path, workspace: Workspace, soulacy_cli: Callable[..., Any]
) -> None:
    site = make_distribution(
        tmp_path / "site",
        "soulacy-memstore",
        "memstore",
        STORE_PLUGIN.replace("{marker}", ""),
        ep_name="memstore",
    )
    env = {"PYTHONPATH": str(site)}
    listed = soulacy_cli(["plugins"], cwd=workspace.path, env=env)
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert "first-result hooks (the first plugin listed answers; the others when it passes):" in out
    # memory_store is the last-resort default: asked even after a plugin that is only installed
    installed_after_builtins = (
        "  soulacy_store: sqlite_store, then memstore (installed), then memory_store"
    )
    assert installed_after_builtins in out
    assert "  soulacy_resolve_policy: policy" in out
    data = json.loads(soulacy_cli(["plugins", "--json"], cwd=workspace.path, env=env).stdout)
    by_name = {p["name"]: p for p in data}
    assert "soulacy_store" in by_name["sqlite_store"]["answers"]
    assert by_name["memstore"]["answers"] == []
    blocked = soulacy_cli(["-p", "no:sqlite_store", "plugins"], cwd=workspace.path, env=env)
    # The builtin disabled, the installed plugin answers — before the last-resort memory store.
    assert "  soulacy_store: memstore (installed), then memory_store\n" in blocked.stdout


def test_the_demo_runs_on_the_builtins_whatever_is_installed(
    tmp_path: Path, soulacy_cli: Callable[..., Any]
) -> None:
    site = make_distribution(
        tmp_path / "site",
        "soulacy-memstore",
        "memstore",
        STORE_PLUGIN.replace("{marker}", "(tryfirst=True)"),
        ep_name="memstore",
    )
    demo = tmp_path / "demo"
    result = soulacy_cli(["demo", "--keep", str(demo)], cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(demo / "soulacy.db") as conn:  # the builtin SQLite store kept the run
        assert conn.execute("SELECT agent_id, status FROM runs").fetchall() == [
            ("demo", "completed")
        ]


def test_a_disabled_plugin_is_blamed_only_for_keys_it_owns_in_that_file(
    workspace: Workspace, make_kernel: Callable[..., Kernel], capsys: pytest.CaptureFixture[str]
) -> None:
    """``file_tools`` declares the agent's ``tools`` trust root (a declaration that owns no
    key) and ``sqlite_store`` owns the workspace's ``store``: with both disabled, neither is
    blamed for a ``tools:`` in config.yaml, nor ``sqlite_store`` for a ``store:`` in SOUL.yaml."""
    from soulacy.cli import main

    pm = make_kernel(plugins=["no:file_tools", "no:sqlite_store"]).pm
    assert pm.blocked_owner("tools") is None
    assert pm.blocked_owner("tools", "agent") is None  # core owns it there
    assert pm.blocked_owner("store.busy_timeout") == "sqlite_store"
    assert pm.blocked_owner("store.busy_timeout", "agent") is None

    workspace.write_config("tools: [add]\n")
    workspace.write_agent("bot", "store: {busy_timeout: 10s}\n")
    args = ["--workspace", str(workspace.path), "-p", "no:file_tools", "-p", "no:sqlite_store"]
    code = main([*args, "config", "validate"], environ={})
    err = capsys.readouterr().err
    assert code == 2, err
    assert "config.yaml:1:1: tools: unknown key" in err, err
    assert "which is disabled" not in err, err
    workspace.write_config("")
    code = main([*args, "config", "validate"], environ={})
    err = capsys.readouterr().err
    assert code == 2, err
    assert "SOUL.yaml:1:1: store: unknown key" in err, err
    assert "which is disabled" not in err, err
