"""Deprecated: the kits and helpers moved to :mod:`soulacy.testing`, the fixtures to
:mod:`soulacy.testing.pytest_plugin`. This module re-exports both for one release.

``from soulacy.kernel.testing import check_store`` becomes
``from soulacy.testing import check_store``, and ``pytest_plugins =
["soulacy.kernel.testing"]`` becomes ``pytest_plugins = ["soulacy.testing.pytest_plugin"]``.
Until then, registering this module as a pytest plugin registers the new one (its
``pytest_plugins``), so the fixtures ``workspace``, ``make_kernel``, ``kernel`` and
``hook_recorder`` keep working; importing it does not import pytest.
"""

from __future__ import annotations

from soulacy.testing import (
    CHECKPOINT_CHECK_NAMES,
    COMPACTOR_CHECK_NAMES,
    PROCESS_CHECK_NAMES,
    PROGRESS_CHECK_NAMES,
    RUN_STRATEGY_CHECK_NAMES,
    STORE_CHECK_NAMES,
    STORE_CHECKS,
    TOOL_LOOP_CHECK_NAMES,
    TRANSPORT_CHECK_NAMES,
    TRANSPORT_CHECKS,
    HookCall,
    HookRecorder,
    ProcessKitResult,
    RefusalKind,
    TransportAdapter,
    TransportEvent,
    TransportRefused,
    Workspace,
    check_checkpoint_store,
    check_compactor,
    check_progress_detector,
    check_provider,
    check_run_strategy,
    check_service_stops,
    check_store,
    check_store_processes,
    check_tool_loop,
    check_transport,
    participant_plugin,
    throwaway_plugin,
)

# Registered as a pytest plugin (pytest_plugins = ["soulacy.kernel.testing"] or -p), this
# module registers the fixtures' plugin too.
pytest_plugins = ["soulacy.testing.pytest_plugin"]

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
