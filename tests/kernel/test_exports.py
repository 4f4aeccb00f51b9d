"""The public surface of ``soulacy.kernel`` and ``soulacy.testing``, pinned (as trio's
test_exports).

Each public name has one home (decision 0028). A change here is a change of the public API:
add the name to the module's ``__all__`` and to the list below, in the same change.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

SURFACE: dict[str, list[str]] = {
    "soulacy.kernel": [
        "AGENTS_DIR",
        "AGENT_FILE",
        "BUILTIN_PLUGINS",
        "CONFIG_FILE",
        "DEFAULT_GRACE_PERIOD",
        "KEPT_SHOWN",
        "PluginsConfig",
        "RunHandle",
        "Stash",
        "StashKey",
        "converter",
        "DROP",
        "AgentSpec",
        "CapacityError",
        "CliCommand",
        "CliContext",
        "ConfigError",
        "ConfigIssue",
        "ConfigSection",
        "Duration",
        "Event",
        "EventStream",
        "Keep",
        "KeptKey",
        "Kernel",
        "KeyPath",
        "LoadedPlugins",
        "Location",
        "PluginError",
        "PluginInfo",
        "RunIdInUse",
        "RunNotContinuable",
        "RunRequest",
        "RunResult",
        "Scope",
        "Service",
        "Settings",
        "SoulacyError",
        "SoulacyPluginManager",
        "Tool",
        "ToolCallContext",
        "current_tool_call",
        "Effects",
        "file_functions",
        "UsageError",
        "format_duration",
        "hookimpl",
        "hookspec",
        "json_encoder",
        "lazy_exports",
        "load_document",
        "load_plugins",
        "open_kernel",
        "parse_scalar",
        "redact",
        "redact_arguments",
        "redact_text",
        "structure",
    ],
    "soulacy.cli": ["main"],
    "soulacy.kernel.cli": ["main"],  # deprecated: an alias of soulacy.cli's, for one release
    "soulacy.kernel.contracts": [
        "ApprovalKeeper",
        "Compactor",
        "ContextOverflow",
        "Decided",
        "DecisionKeywords",
        "Happened",
        "ProgressDetector",
        "Refusal",
        "RunParticipant",
        "RunStrategy",
        "ToolLoop",
        "Verdict",
        "VerdictKind",
    ],
    "soulacy.kernel.engine": [
        "AWAITING_APPROVAL",
        "SHUTDOWN",
        "ContinueOptions",
        "HeldLease",
        "LeaseKeeper",
        "Run",
        "RunStop",
        "Runner",
        "Status",
        "Timeouts",
        "ToolOutcome",
        "Verification",
        "VerificationStatus",
        "in_tool_call",
        "new_id",
        "schema_of",
        "validate_arguments",
    ],
    "soulacy.kernel.messages": [
        "Message",
        "ModelReply",
        "ModelRequest",
        "Role",
        "ToolCall",
        "ToolSpec",
        "Usage",
    ],
    "soulacy.kernel.policy": [
        "AGENT",
        "CEILING",
        "CONFIG",
        "CORE_LIMITS",
        "DEFAULT",
        "DURATION_FIELDS",
        "ENVIRONMENT",
        "MODEL",
        "REQUEST",
        "ExecutionPolicy",
        "Limit",
        "ModelCapacity",
        "PolicyLimit",
        "declared_limits",
    ],
    "soulacy.kernel.providers": [
        "ContextLengthExceeded",
        "Provider",
        "ProviderConfig",
        "ProviderError",
        "ProviderRegistry",
        "ProviderType",
        "TextSink",
    ],
    "soulacy.kernel.store": [
        "EVERY_PRINCIPAL",
        "AlreadyDecided",
        "ApprovalDecision",
        "ApprovalRequest",
        "ApprovalStore",
        "Checkpoint",
        "CheckpointStatus",
        "CheckpointStore",
        "CancelRequest",
        "ConversationKey",
        "ConversationStore",
        "CounterStore",
        "Ending",
        "EveryPrincipal",
        "HistoryEntry",
        "Lease",
        "LeaseGrant",
        "LeaseLost",
        "LeaseOwner",
        "LeaseStore",
        "ProofRecord",
        "ProofStore",
        "Pruned",
        "RetentionLimits",
        "RetentionStore",
        "RunEvent",
        "RunEventBatch",
        "RunEventStore",
        "RunEvents",
        "RunIdTaken",
        "RunRecord",
        "StateRow",
        "StorageError",
        "Store",
        "ToolRecord",
        "canonical_json",
        "identity_differs",
        "label_interrupted",
        "record_turn_and_end",
        "record_turn_and_state",
        "run_as_read",
        "takes_ending",
        "takes_state",
    ],
    "soulacy.testing": [
        "STORE_CHECKS",
        "STORE_CHECK_NAMES",
        "CHECKPOINT_CHECK_NAMES",
        "PROCESS_CHECK_NAMES",
        "PROGRESS_CHECK_NAMES",
        "COMPACTOR_CHECK_NAMES",
        "RUN_STRATEGY_CHECK_NAMES",
        "TOOL_LOOP_CHECK_NAMES",
        "HookCall",
        "HookRecorder",
        "ProcessKitResult",
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
        "TRANSPORT_CHECKS",
        "TRANSPORT_CHECK_NAMES",
        "RefusalKind",
        "TransportAdapter",
        "TransportEvent",
        "TransportRefused",
    ],
    # the opt-in pytest plugin: its fixtures
    "soulacy.testing.pytest_plugin": ["hook_recorder", "kernel", "make_kernel", "workspace"],
    "soulacy.kernel.yamlio": ["load_yaml_file", "parse_yaml", "plain"],
    # libraries under plugins/, as providerkit is: how every store builds a run's proof, and
    # what every editor of a person's file shares
    "soulacy.plugins.proofkit": ["RECEIPT_FIELD_CHARS", "bounded", "make_proof", "receipt"],
    "soulacy.plugins.yamledit": [
        "apply_changes",
        "atomic_write",
        "dump_round_trip",
        "guess_indentation",
        "keep_unchanged_lines",
        "save_config_changes",
        "trust_root_changes",
    ],
}
# Deprecated modules that re-export another public module's names for one release: each name
# keeps its one home (the module it re-exports), and is the same object here.
RE_EXPORTS = {"soulacy.kernel.testing": "soulacy.testing"}
# Deprecated modules that are another public module under its old name, for one release.
ALIASES = {"soulacy.kernel.cli": "soulacy.cli"}  # the launcher left the kernel (decision 0075)
# Public modules with no star-export surface: the hook specifications (read by pluggy and by
# hookdoc; their markers are exported from soulacy.kernel) and the docs generator.
WITHOUT_ALL = ["soulacy.kernel.hookspecs", "soulacy.testing.hookdoc"]


@pytest.mark.parametrize("module_name", sorted(SURFACE))
def test_each_public_module_exports_exactly_its_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = module.__all__
    assert sorted(exported) == sorted(SURFACE[module_name])
    assert len(exported) == len(set(exported)), "a name is listed twice"
    for name in exported:
        assert getattr(module, name) is not None, name
        assert name in dir(module), name


def test_every_name_resolves_through_a_star_import() -> None:
    for module_name, names in SURFACE.items():
        namespace: dict[str, object] = {}
        exec(f"from {module_name} import *", namespace)  # the names __all__ promises
        assert set(names) <= set(namespace), module_name


def test_no_name_has_two_public_homes() -> None:
    homes = Counter(
        name for module, names in SURFACE.items() if module not in ALIASES for name in names
    )
    assert [name for name, count in homes.items() if count > 1] == []


def test_every_public_module_is_pinned() -> None:
    import soulacy.kernel

    path = soulacy.kernel.__path__
    import pkgutil

    public = {
        f"soulacy.kernel.{info.name}"
        for info in pkgutil.iter_modules(path)
        if not info.name.startswith("_")
    }
    pinned = {name for name in SURFACE if name.startswith("soulacy.kernel.")}
    kernel_without_all = {name for name in WITHOUT_ALL if name.startswith("soulacy.kernel.")}
    assert public == pinned | set(RE_EXPORTS) | kernel_without_all
    for module_name in WITHOUT_ALL:
        assert not hasattr(importlib.import_module(module_name), "__all__"), module_name


@pytest.mark.parametrize("module_name", sorted(RE_EXPORTS))
def test_a_deprecated_module_re_exports_the_names_of_their_home(module_name: str) -> None:
    module = importlib.import_module(module_name)
    home = importlib.import_module(RE_EXPORTS[module_name])
    assert sorted(module.__all__) == sorted(SURFACE[RE_EXPORTS[module_name]])
    for name in module.__all__:
        with pytest.deprecated_call(match=f"import {name} from {RE_EXPORTS[module_name]}"):
            assert getattr(module, name) is getattr(home, name), name
    assert "deprecated" in (module.__doc__ or "").lower()


def test_the_testing_package_names_come_from_the_modules_that_define_them() -> None:
    import soulacy.testing as testing

    homes = testing._EXPORTS
    assert sorted(n for names in homes.values() for n in names) == sorted(testing.__all__)
    for module, names in homes.items():
        source = importlib.import_module(module, "soulacy.testing")
        for name in names:
            assert getattr(testing, name) is getattr(source, name), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = testing.Nope  # type: ignore[attr-defined]


def test_the_package_names_come_from_the_modules_that_define_them() -> None:
    import soulacy.kernel as kernel
    from soulacy.kernel import hookspecs

    assert kernel.hookimpl is hookspecs.hookimpl
    assert kernel.hookspec is hookspecs.hookspec
    homes = kernel._EXPORTS  # the lazy table agrees with __all__, name for name
    assert sorted(n for names in homes.values() for n in names) == sorted(kernel.__all__)
    for module, names in homes.items():
        source = importlib.import_module(module, "soulacy.kernel")
        for name in names:
            assert getattr(kernel, name) is getattr(source, name), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = kernel.Nope  # type: ignore[attr-defined]


def test_the_type_checkers_imports_are_the_lazy_table() -> None:
    """What mypy sees (the ``TYPE_CHECKING`` imports, each re-exported as ``Name as Name``) is
    what runs (``_EXPORTS``), name for name, home for home."""
    import ast

    import soulacy.kernel as kernel

    tree = ast.parse(Path(kernel.__file__).read_text(encoding="utf-8"))
    (block,) = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    imported: dict[str, list[str]] = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} is not re-exported (Name as Name)"
                imported.setdefault(f".{node.module}", []).append(alias.name)
    assert {m: sorted(n) for m, n in imported.items()} == {
        m: sorted(n) for m, n in kernel._EXPORTS.items()
    }


def test_names_with_one_home_are_not_in_the_engine_module() -> None:
    """RunRequest, RunResult and Tool live in soulacy.kernel only (decision 0028)."""
    from soulacy.kernel import engine

    for name in ("RunRequest", "RunResult", "Tool"):
        assert not hasattr(engine, name), name


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(out.stdout.split())


HEAVY = {"trio", "httpx", "ruamel.yaml", "cattrs", "sqlite3", "hypercorn"}


def test_importing_the_kernel_package_loads_nothing_heavy() -> None:
    modules = imported_after("import soulacy.kernel")
    assert modules & HEAVY == set()
    assert sorted(m for m in modules if m.startswith("soulacy.")) == ["soulacy.kernel"]


def test_a_plugin_importing_hookimpl_loads_only_the_hook_specifications() -> None:
    modules = imported_after("from soulacy.kernel import hookimpl")
    assert modules & HEAVY == set()
    assert {m for m in modules if m.startswith("soulacy.")} == {
        "soulacy.kernel",
        "soulacy.kernel.hookspecs",
    }


@pytest.mark.parametrize("module_name", ["soulacy.cli", "soulacy.kernel.cli"])
def test_importing_the_launcher_module_defers_the_launcher(module_name: str) -> None:
    modules = imported_after(f"import {module_name}")
    assert modules & HEAVY == set()
    assert "soulacy.cli._launcher" not in modules


def test_the_kernel_holds_no_launcher() -> None:
    """The launcher is a client of the kernel (decision 0075): running a command through
    ``soulacy.kernel`` alone imports nothing of ``soulacy.cli``."""
    modules = imported_after("from soulacy.kernel import CliCommand, CliContext, hookimpl")
    assert not {m for m in modules if m.startswith("soulacy.cli")}
    assert "argparse" not in modules  # the contract does not import the parser


def test_the_old_launcher_module_warns_and_runs_the_new_one() -> None:
    from soulacy.kernel import cli as old

    with pytest.deprecated_call(match=r"use soulacy\.cli"):
        assert old.main(["--version"]) == 0


def test_the_help_of_the_launcher_loads_no_http_stack() -> None:
    """``soulacy --help`` lists every plugin's commands, so it loads the plugins; they import
    httpx (providers) and hypercorn (the HTTP service) only when a provider or the server is
    first used."""
    loaded = imported_after(
        "from soulacy.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert not {"httpx", "hypercorn"} & loaded


def test_the_proof_names_that_left_the_store_module_still_work_for_one_release() -> None:
    """``make_proof`` and its helpers moved to the proof toolkit; read from
    ``soulacy.kernel.store`` they are the same objects, with a DeprecationWarning."""
    import soulacy.kernel.store as store
    import soulacy.plugins.proofkit as proofkit

    for name in proofkit.__all__:
        with pytest.deprecated_call(match=f"import {name} from soulacy.plugins.proofkit"):
            assert getattr(store, name) is getattr(proofkit, name), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = store.Nope  # type: ignore[attr-defined]
