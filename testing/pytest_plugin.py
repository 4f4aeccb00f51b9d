"""Soulacy's pytest plugin: the fixtures of hook-level tests, which a suite opts in to.

Installing Soulacy registers no fixture anywhere (decision 0028). A suite that wants these
declares, in its top-level ``conftest.py``::

    pytest_plugins = ["soulacy.testing.pytest_plugin"]

(or runs ``pytest -p soulacy.testing.pytest_plugin``). Fixtures:

* ``workspace`` — a :class:`~soulacy.testing.Workspace` in a temporary folder, to write
  config.yaml and agents;
* ``make_kernel`` — build a :class:`~soulacy.kernel.Kernel` on that workspace with the plugins a
  test chooses (entry-point autoloading is off and the environment is empty unless asked);
* ``kernel`` — ``make_kernel()`` with the builtin plugins;
* ``hook_recorder`` — a :class:`~soulacy.testing.HookRecorder` on every kernel the test builds
  through ``make_kernel`` (``kernel`` included, ``make_kernel(autoload=True)`` and its
  entry-point plugins too), from the validation of its configuration on.

The kits, the recorder and the workspace helpers are :mod:`soulacy.testing`, which does not
import pytest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from soulacy.kernel import Kernel, load_plugins

from ._recorder import HookRecorder
from ._workspace import Workspace

__all__ = ["hook_recorder", "kernel", "make_kernel", "workspace"]


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """An empty workspace in a temporary folder."""
    folder = tmp_path / "workspace"
    folder.mkdir()
    return Workspace(folder)


@pytest.fixture
def make_kernel(workspace: Workspace, request: pytest.FixtureRequest) -> Callable[..., Kernel]:
    """Build kernels on the test's workspace; keyword arguments go to ``Kernel.load``.

    When the test uses ``hook_recorder``, each kernel is recorded from before its configuration
    is validated: ``soulacy_validate_config`` and ``soulacy_configure`` are in the record.
    """

    def make(**options: Any) -> Kernel:
        options.setdefault("autoload", False)
        options.setdefault("environ", {})
        loaded = load_plugins(workspace.path, **options)  # Kernel.load, in two steps
        if "hook_recorder" in request.fixturenames:
            recorder: HookRecorder = request.getfixturevalue("hook_recorder")
            recorder.attach(loaded.pm)
        return Kernel.from_plugins(loaded)

    return make


@pytest.fixture
def kernel(make_kernel: Callable[..., Kernel]) -> Kernel:
    """A kernel with the builtin plugins on an empty workspace."""
    return make_kernel()


@pytest.fixture
def hook_recorder() -> Iterator[HookRecorder]:
    """Records the hook calls of every kernel the test builds with ``make_kernel`` (the
    ``kernel`` fixture included), whatever its plugins: builtins, entry points, extras."""
    recorder = HookRecorder()
    yield recorder
    recorder.finish()
