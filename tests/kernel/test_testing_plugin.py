"""Soulacy's pytest plugin is opt-in, and its hook recorder sees every plugin of a kernel.

Installing Soulacy must not inject ``kernel`` or ``workspace`` into unrelated test suites
(decision 0028): they get the fixtures only by declaring
``pytest_plugins = ["soulacy.testing.pytest_plugin"]`` (or ``-p soulacy.testing.pytest_plugin``;
the deprecated ``soulacy.kernel.testing`` still works for one release). The kits and helpers,
``soulacy.testing``, do not import pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from soulacy.kernel import Kernel
from soulacy.testing import HookRecorder

UNRELATED_TESTS = """
import sys

def test_nothing_of_soulacy_is_imported():
    assert not [m for m in sys.modules if m.startswith("soulacy")]

def test_uses_a_fixture_named_kernel(kernel):
    pass

def test_uses_a_fixture_named_workspace(workspace):
    pass
"""

OPTED_IN_TESTS = """
def test_gets_the_fixtures(workspace, make_kernel, kernel, hook_recorder):
    assert kernel.workspace == workspace.path
    make_kernel()
    assert hook_recorder.getcalls("soulacy_configure")
"""


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SOULACY_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def make_project(root: Path, tests: str, conftest: str | None = None) -> Path:
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")  # its own rootdir, not this suite's
    (root / "test_it.py").write_text(tests)
    if conftest is not None:
        (root / "conftest.py").write_text(conftest)
    return root


def test_an_unrelated_project_gets_no_soulacy_fixture(tmp_path: Path) -> None:
    project = make_project(tmp_path / "unrelated", UNRELATED_TESTS)
    done = run_pytest(project)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 passed, 2 errors" in out, out
    assert "fixture 'kernel' not found" in out
    assert "fixture 'workspace' not found" in out


@pytest.mark.parametrize(
    ("conftest", "args"),
    [
        ('pytest_plugins = ["soulacy.testing.pytest_plugin"]\n', ()),
        (None, ("-p", "soulacy.testing.pytest_plugin")),
        ('pytest_plugins = ["soulacy.kernel.testing"]\n', ()),  # deprecated, for one release
        (None, ("-p", "soulacy.kernel.testing")),
    ],
    ids=["pytest_plugins", "-p", "old-pytest_plugins", "old-p"],
)
def test_a_project_that_opts_in_gets_the_fixtures(
    tmp_path: Path, conftest: str | None, args: tuple[str, ...]
) -> None:
    project = make_project(tmp_path / "opted-in", OPTED_IN_TESTS, conftest)
    done = run_pytest(project, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import soulacy.testing",
        "from soulacy.testing import *",  # every kit, the recorder and the workspace helpers
        "import soulacy.kernel.testing",  # the deprecated re-export
    ],
)
def test_the_testing_package_does_not_import_pytest(code: str) -> None:
    modules = imported_after(code)
    assert "pytest" not in modules
    assert "_pytest" not in modules


def test_each_kit_is_importable_alone() -> None:
    modules = imported_after("from soulacy.testing import check_progress_detector")
    assert "soulacy.testing._progress" in modules
    others = {"_processes", "_loops", "_transport", "_compaction", "_services", "_providers"}
    assert not {f"soulacy.testing.{name}" for name in others} & modules


def test_the_old_module_re_exports_the_new_names() -> None:
    import soulacy.kernel.testing as old
    import soulacy.testing as new

    assert old.__all__ == new.__all__
    for name in new.__all__:
        with pytest.deprecated_call(match=f"import {name} from soulacy.testing"):
            assert getattr(old, name) is getattr(new, name), name
    assert old.pytest_plugins == ["soulacy.testing.pytest_plugin"]


RECORDED_PLUGIN = """
def soulacy_configure(kernel):
    pass
"""


@pytest.fixture
def entry_point_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An installed distribution (a dist-info folder on sys.path) with a ``soulacy`` entry point."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "recorded_plugin.py").write_text(RECORDED_PLUGIN)
    dist = site / "soulacy_recorded-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: soulacy-recorded\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[soulacy]\nrecorded = recorded_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    return "recorded"


def test_the_recorder_sees_entry_point_plugins(
    entry_point_plugin: str, make_kernel: Callable[..., Kernel], hook_recorder: HookRecorder
) -> None:
    kernel = make_kernel(autoload=True)
    call = hook_recorder.assert_called("soulacy_configure", kernel=kernel)
    assert entry_point_plugin in call.plugins
    assert hook_recorder.assert_called("soulacy_validate_config", kernel=kernel).plugins


def test_the_recorder_sees_the_kernel_fixture_from_its_loading_on(
    kernel: Kernel, hook_recorder: HookRecorder
) -> None:
    hook_recorder.assert_called("soulacy_validate_config", kernel=kernel)
    hook_recorder.assert_called("soulacy_configure", kernel=kernel)


def test_the_recorder_records_every_kernel_of_the_test(
    make_kernel: Callable[..., Kernel], hook_recorder: HookRecorder
) -> None:
    first, second = make_kernel(), make_kernel()
    hook_recorder.assert_called("soulacy_configure", kernel=first)
    hook_recorder.assert_called("soulacy_configure", kernel=second)
    hook_recorder.finish()
    make_kernel()
    assert len(hook_recorder.getcalls("soulacy_configure")) == 2


def test_without_the_recorder_kernels_are_not_monitored(kernel: Kernel) -> None:
    recorder = HookRecorder(kernel.pm)  # the class works on any manager, from now on
    kernel.hook.soulacy_validate_config(kernel=kernel, config=kernel.config)
    (call,) = recorder.getcalls("soulacy_validate_config")
    assert call.plugins
    recorder.finish()
