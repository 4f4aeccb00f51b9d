"""Testing Soulacy and its plugins: conformance kits, the hook recorder, workspace helpers.

This package does not import pytest: a kit runs under any test runner (or none). The pytest
fixtures (``workspace``, ``make_kernel``, ``kernel``, ``hook_recorder``) are the separate,
opt-in plugin :mod:`soulacy.testing.pytest_plugin`; installing Soulacy registers no fixture
anywhere (decision 0028). A suite that wants them declares, in its top-level ``conftest.py``::

    pytest_plugins = ["soulacy.testing.pytest_plugin"]

Names are loaded on first use (PEP 562): ``from soulacy.testing import check_store`` imports
the store kit and nothing of the others.

Conformance kits that third-party implementations run against themselves:
:func:`check_store` (every role of a store, in one process: history, runs and attempts, tool
records, proofs, checkpoints, state, leases and fencing, counters, cancellation requests),
:func:`check_checkpoint_store` (its checkpoint part), :func:`check_store_processes` (the
checks of a store shared by several processes, with real child processes),
:func:`check_progress_detector`, :func:`check_compactor`, :func:`check_provider`,
:func:`check_transport` (any transport, through a :class:`TransportAdapter` its author writes),
:func:`check_tool_loop` and :func:`check_run_strategy` (a ``soulacy_tool_loop`` or
``soulacy_run_strategy`` plugin, through ordinary runs of kernels it is registered in), and
:func:`check_service_stops` (a service returns by itself when its kernel stops).
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

And the helpers of hook-level tests: :class:`Workspace` (config.yaml and agents in a folder),
:class:`HookRecorder` (every hook call of plugin managers, as :class:`HookCall` records) and
:func:`throwaway_plugin`, to register a plugin made of a few functions.
"""

from __future__ import annotations

from soulacy.kernel import lazy_exports

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than this module
if TYPE_CHECKING:
    from ._checkpoints import CHECKPOINT_CHECK_NAMES, check_checkpoint_store
    from ._compaction import COMPACTOR_CHECK_NAMES, check_compactor
    from ._loops import (
        RUN_STRATEGY_CHECK_NAMES,
        TOOL_LOOP_CHECK_NAMES,
        check_run_strategy,
        check_tool_loop,
    )
    from ._processes import PROCESS_CHECK_NAMES, ProcessKitResult, check_store_processes
    from ._progress import PROGRESS_CHECK_NAMES, check_progress_detector
    from ._providers import check_provider
    from ._recorder import HookCall, HookRecorder, participant_plugin, throwaway_plugin
    from ._services import check_service_stops
    from ._store import STORE_CHECK_NAMES, STORE_CHECKS, check_store
    from ._transport import (
        TRANSPORT_CHECK_NAMES,
        TRANSPORT_CHECKS,
        RefusalKind,
        TransportAdapter,
        TransportEvent,
        TransportRefused,
        check_transport,
    )
    from ._workspace import Workspace

# The module (relative to this package) that defines each exported name.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "._checkpoints": ("CHECKPOINT_CHECK_NAMES", "check_checkpoint_store"),
    "._compaction": ("COMPACTOR_CHECK_NAMES", "check_compactor"),
    "._loops": (
        "RUN_STRATEGY_CHECK_NAMES",
        "TOOL_LOOP_CHECK_NAMES",
        "check_run_strategy",
        "check_tool_loop",
    ),
    "._processes": ("PROCESS_CHECK_NAMES", "ProcessKitResult", "check_store_processes"),
    "._progress": ("PROGRESS_CHECK_NAMES", "check_progress_detector"),
    "._providers": ("check_provider",),
    "._recorder": ("HookCall", "HookRecorder", "participant_plugin", "throwaway_plugin"),
    "._services": ("check_service_stops",),
    "._store": ("STORE_CHECKS", "STORE_CHECK_NAMES", "check_store"),
    "._transport": (
        "TRANSPORT_CHECKS",
        "TRANSPORT_CHECK_NAMES",
        "RefusalKind",
        "TransportAdapter",
        "TransportEvent",
        "TransportRefused",
        "check_transport",
    ),
    "._workspace": ("Workspace",),
}

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
    "participant_plugin",
    "throwaway_plugin",
]

if not TYPE_CHECKING:  # hidden from type checkers, which would type every unknown name Any
    __getattr__ = lazy_exports(
        __name__, {name: module for module, names in _EXPORTS.items() for name in names}
    )

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
