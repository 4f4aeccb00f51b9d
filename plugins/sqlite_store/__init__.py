"""The builtin SQLite store: history with reply metadata, runs, tool records and proofs.

One file per workspace (``store.path``, default ``soulacy.db`` in the workspace)::

    store:
      path: soulacy.db          # relative to the workspace
      busy_timeout: 30s         # how long a writer waits for another process's writer
      synchronous: NORMAL       # or FULL: an fsync per commit, slower, survives power loss

Replace it by disabling it (``-p no:sqlite_store``) and loading another store plugin; with it
disabled and none other, the kernel keeps everything in memory.
"""

from __future__ import annotations

import argparse
import weakref
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from soulacy.kernel import (
    CliCommand,
    CliContext,
    ConfigSection,
    Duration,
    Kernel,
    UsageError,
    hookimpl,
)
from soulacy.kernel.store import HistoryEntry, RunRecord

from ._schema import SCHEMA_VERSION
from ._store import SQLiteStore

__all__ = ["SCHEMA_VERSION", "SQLiteStore", "StoreConfig"]


@attrs.frozen
class StoreConfig:
    path: str = "soulacy.db"
    busy_timeout: Duration = Duration(30)
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"


_stores: weakref.WeakKeyDictionary[Kernel, SQLiteStore] = weakref.WeakKeyDictionary()


def store_of(kernel: Kernel) -> SQLiteStore:
    """The kernel's store: one per kernel, serving every storage hook."""
    store = _stores.get(kernel)
    if store is None:
        config: StoreConfig = kernel.config.section("store")
        store = SQLiteStore(
            kernel.workspace / config.path,
            busy_timeout=config.busy_timeout.seconds,
            synchronous=config.synchronous,
        )
        _stores[kernel] = store
    return store


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("store", StoreConfig, doc="the SQLite store")]


@hookimpl
def soulacy_conversation_store(kernel: Kernel) -> SQLiteStore:
    return store_of(kernel)


@hookimpl
def soulacy_proof_store(kernel: Kernel) -> SQLiteStore:
    return store_of(kernel)


@hookimpl
def soulacy_checkpoint_store(kernel: Kernel) -> SQLiteStore:
    return store_of(kernel)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand(
            "history",
            "a conversation's stored messages with their reply metadata",
            _history,
            _configure_history,
        ),
        CliCommand("runs", "recent runs and how they ended", _runs, _configure_runs),
        CliCommand("runs show", "one run: metadata and proof", _run_show, _configure_show),
    ]


def _configure_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="session id")
    parser.add_argument("--agent", help="only this agent's messages")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_runs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only this agent's runs")
    parser.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", help="run id")
    parser.add_argument("--json", action="store_true", help="print JSON")


async def _history(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        entries = await kernel.conversation_store().history(args.session, args.agent)
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json([attrs.asdict(e) for e in entries])
        return 0
    if not entries:
        ctx.print(f"no stored messages in session {args.session!r}")
    for entry in entries:
        ctx.print(_entry_line(entry))
    return 0


def _entry_line(entry: HistoryEntry) -> str:
    meta = entry.metadata or {}
    notice = ""
    if entry.role == "assistant" and meta:
        notice = f"  [{meta.get('status')}"
        if meta.get("incomplete_reason"):
            notice += f": {meta['incomplete_reason']}"
        notice += f", {meta.get('verification')}]"
    text = entry.content.replace("\n", " ")
    if entry.tool_calls:
        text = (text + " " if text else "") + ", ".join(
            f"→ {c['name']}({c.get('arguments', {})})" for c in entry.tool_calls
        )
    return f"{entry.role:>9}: {text[:200]}{notice}"


async def _runs(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        runs = await kernel.conversation_store().list_runs(args.limit, args.agent)
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json([attrs.asdict(r) for r in runs])
        return 0
    for run in runs:
        ctx.print(_run_line(run))
    return 0


def _run_line(run: RunRecord) -> str:
    reason = f" ({run.incomplete_reason})" if run.incomplete_reason else ""
    return (
        f"{run.run_id}  {run.agent_id}  session {run.session_id}  {run.status}{reason}"
        f"  {run.verification or '-'}"
    )


async def _run_show(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        run = await kernel.conversation_store().get_run(args.run_id)
        proof = await kernel.proof_store().get_proof(args.run_id)
    finally:
        await kernel.aclose()
    if run is None:
        raise UsageError(f"no run {args.run_id!r} in {store_of(kernel).path}")
    data: dict[str, Any] = {
        "run": attrs.asdict(run),
        "proof": {"sha256": proof.sha256, **proof.data()} if proof else None,
    }
    if args.json:
        ctx.print_json(data)
        return 0
    ctx.print(_run_line(run))
    for key, value in (run.metadata or {}).items():
        ctx.print(f"  {key}: {value}")
    if proof is not None:
        ctx.print(f"  proof sha256: {proof.sha256} ({proof.receipts} receipts)")
    return 0
