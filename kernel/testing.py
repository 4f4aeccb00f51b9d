"""Hook-level testing for Soulacy and its plugins: a pytest plugin that a test suite opts in to.

Installing Soulacy registers no fixture anywhere (decision 0028). A suite that wants these
declares, in its top-level ``conftest.py``::

    pytest_plugins = ["soulacy.kernel.testing"]

(or runs ``pytest -p soulacy.kernel.testing``). Fixtures:

* ``workspace`` — a :class:`Workspace` in a temporary folder, to write config.yaml and agents;
* ``make_kernel`` — build a :class:`~soulacy.kernel.Kernel` on that workspace with the plugins a
  test chooses (entry-point autoloading is off and the environment is empty unless asked);
* ``kernel`` — ``make_kernel()`` with the builtin plugins;
* ``hook_recorder`` — a :class:`HookRecorder` on every kernel the test builds through
  ``make_kernel`` (``kernel`` included, ``make_kernel(autoload=True)`` and its entry-point
  plugins too), from the validation of its configuration on.

Conformance kits that third-party implementations run against themselves:
:func:`check_store` (every role of a store, in one process: history, runs and attempts, tool
records, proofs, checkpoints, state, leases and fencing, counters, cancellation requests),
:func:`check_checkpoint_store` (its checkpoint part), :func:`check_store_processes` (the
checks of a store shared by several processes, with real child processes),
:func:`check_progress_detector`, :func:`check_compactor`, :func:`check_provider`,
:func:`check_transport` (any transport, through a :class:`TransportAdapter` its author writes),
and :func:`check_tool_loop` and :func:`check_run_strategy` (a ``soulacy_tool_loop`` or
``soulacy_run_strategy`` plugin, through ordinary runs of kernels it is registered in).
Each check of a kit can run alone, as trio's ``check_*_stream`` functions can: a kit of several
checks takes ``only=`` one check's name or several (an unknown name is a ValueError listing
them), and the names are exported to parametrize a suite over, one test per check:
:data:`STORE_CHECK_NAMES`, :data:`CHECKPOINT_CHECK_NAMES`, :data:`PROCESS_CHECK_NAMES`,
:data:`TRANSPORT_CHECK_NAMES`, :data:`PROGRESS_CHECK_NAMES`, :data:`COMPACTOR_CHECK_NAMES`,
:data:`TOOL_LOOP_CHECK_NAMES` and :data:`RUN_STRATEGY_CHECK_NAMES` (``check_provider`` is one
check)::

    @pytest.mark.parametrize("check", STORE_CHECK_NAMES)
    async def test_my_store_conforms(check, tmp_path):
        n = itertools.count()
        await check_store(lambda: MyStore(tmp_path / f"{next(n)}.db"), failing=..., only=check)

And :func:`throwaway_plugin`, to register a plugin made of a few functions.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from ruamel.yaml import YAML

from ._kernel import Kernel
from ._kits import (
    CHECKPOINT_CHECK_NAMES,
    COMPACTOR_CHECK_NAMES,
    PROGRESS_CHECK_NAMES,
    check_checkpoint_store,
    check_compactor,
    check_progress_detector,
    check_provider,
)
from ._loading import AGENT_FILE, AGENTS_DIR, CONFIG_FILE, load_plugins
from ._loop_kit import (
    RUN_STRATEGY_CHECK_NAMES,
    TOOL_LOOP_CHECK_NAMES,
    check_run_strategy,
    check_tool_loop,
)
from ._process_kit import PROCESS_CHECK_NAMES, ProcessKitResult, check_store_processes
from ._service_kit import check_service_stops
from ._store_kit import STORE_CHECK_NAMES, STORE_CHECKS, check_store
from ._transport_kit import (
    TRANSPORT_CHECK_NAMES,
    TRANSPORT_CHECKS,
    RefusalKind,
    TransportAdapter,
    TransportEvent,
    TransportRefused,
    check_transport,
)

__all__ = [
    "CHECKPOINT_CHECK_NAMES",
    "COMPACTOR_CHECK_NAMES",
    "PROCESS_CHECK_NAMES",
    "PROGRESS_CHECK_NAMES",
    "RUN_STRATEGY_CHECK_NAMES",
    "STORE_CHECKS",
    "STORE_CHECK_NAMES",
    "TOOL_LOOP_CHECK_NAMES",
    "TRANSPORT_CHECKS",
    "TRANSPORT_CHECK_NAMES",
    "HookCall",
    "HookRecorder",
    "ProcessKitResult",
    "RefusalKind",
    "TransportAdapter",
    "TransportEvent",
    "TransportRefused",
    "Workspace",
    "check_checkpoint_store",
    "check_compactor",
    "check_progress_detector",
    "check_provider",
    "check_run_strategy",
    "check_service_stops",
    "check_store",
    "check_store_processes",
    "check_tool_loop",
    "check_transport",
    "throwaway_plugin",
]


@attrs.define
class HookCall:
    """One recorded hook call: its name, keyword arguments, the plugins implementing it (in
    call order) and, once finished, its result."""

    name: str
    kwargs: dict[str, Any]
    result: Any = None
    exception: BaseException | None = None
    plugins: tuple[str, ...] = ()

    def __getattr__(self, key: str) -> Any:  # call.agent_id reads the keyword argument
        try:
            return self.kwargs[key]
        except KeyError:
            raise AttributeError(key) from None


class HookRecorder:
    """Records every hook call of plugin managers, built on ``add_hookcall_monitoring``.

    ``HookRecorder(pm)`` records one manager from now on; :meth:`attach` adds another (the
    ``make_kernel`` fixture attaches each kernel it builds to the ``hook_recorder`` fixture).
    """

    def __init__(self, pm: Any = None) -> None:
        self.calls: list[HookCall] = []
        self._open: list[HookCall] = []
        self._undo: list[Callable[[], None]] = []
        self._finished = False
        if pm is not None:
            self.attach(pm)

    def attach(self, pm: Any) -> None:
        """Record the hook calls of ``pm`` too, until :meth:`finish` (after it, nothing)."""
        if not self._finished:
            self._undo.append(pm.add_hookcall_monitoring(self._before, self._after))

    def _before(self, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        # pluggy calls the last registered (and tryfirst) implementation first
        plugins = tuple(impl.plugin_name for impl in reversed(hook_impls))
        call = HookCall(hook_name, dict(kwargs), plugins=plugins)
        self.calls.append(call)
        self._open.append(call)

    def _after(
        self, outcome: Any, hook_name: str, hook_impls: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        call = self._open.pop()
        call.exception = outcome.exception
        if outcome.exception is None:
            call.result = outcome.get_result()

    def getcalls(self, name: str) -> list[HookCall]:
        return [call for call in self.calls if call.name == name]

    def assert_called(self, name: str, **kwargs: Any) -> HookCall:
        """The last call of hook ``name`` whose arguments include ``kwargs``; fails if none."""
        for call in reversed(self.getcalls(name)):
            if all(call.kwargs.get(k) == v for k, v in kwargs.items()):
                return call
        seen = [c.kwargs for c in self.getcalls(name)]
        raise AssertionError(f"hook {name} was not called with {kwargs!r}; calls: {seen!r}")

    def finish(self) -> None:
        """Stop recording: the calls recorded so far stay in :attr:`calls`."""
        self._finished = True
        while self._undo:
            self._undo.pop()()


def throwaway_plugin(name: str = "throwaway", **hooks: Callable[..., Any]) -> Any:
    """A plugin object whose hook implementations are the given ``soulacy_*`` functions."""
    unknown = [key for key in hooks if not key.startswith("soulacy_")]
    if unknown:
        raise TypeError(f"hook implementations must be named soulacy_*: {unknown}")
    return types.SimpleNamespace(name=name, **hooks)


@attrs.define
class Workspace:
    """A workspace folder for a test: config.yaml plus ``agents/<id>/SOUL.yaml``."""

    path: Path

    def write_config(self, content: str | Mapping[str, Any]) -> Path:
        return self._write(self.path / CONFIG_FILE, content)

    def write_agent(self, agent_id: str, content: str | Mapping[str, Any]) -> Path:
        return self._write(self.path / AGENTS_DIR / agent_id / AGENT_FILE, content)

    def scripted_agent(
        self,
        agent_id: str,
        steps: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[str] = (),
        repeat: bool = False,
        **keys: Any,
    ) -> Path:
        """An agent on the scripted model (the builtin ``scripted`` plugin) playing ``steps``:
        each a ``{"text": ...}`` or ``{"tool": name, "arguments": {...}, "id": ...}`` reply.
        ``keys`` are more SOUL.yaml keys (``max_turns=3``, ``budget={...}``)."""
        script = f"{AGENTS_DIR}/{agent_id}/script.yaml"
        self._write(self.path / script, {"steps": [dict(s) for s in steps], "repeat": repeat})
        soul = {"llm": {"provider": "scripted", "model": script}, "tools": list(tools), **keys}
        return self.write_agent(agent_id, soul)

    @staticmethod
    def _write(path: Path, content: str | Mapping[str, Any]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            with path.open("w", encoding="utf-8") as fh:
                YAML(typ="safe", pure=True).dump(dict(content), fh)
        return path


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
