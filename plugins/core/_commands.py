"""The core commands that read and change the workspace: ``plugins``, ``config show|get|set``,
``agents …``, ``history``, ``runs``, ``runs show`` and ``plugin new`` (``config validate`` is
``_validate``'s)."""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from ruamel.yaml import YAML

from soulacy.kernel import CliContext, UsageError, converter, parse_scalar, redact
from soulacy.plugins.yamledit import atomic_write

if TYPE_CHECKING:  # the kernel and its store import trio: `soulacy plugins` needs neither
    from soulacy.kernel import Kernel
    from soulacy.kernel.store import HistoryEntry, RunRecord

_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def _yaml_text(data: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(data, out)
    return out.getvalue().rstrip("\n")


def _plugins(args: argparse.Namespace, ctx: CliContext) -> int:
    pm = ctx.plugins.pm
    described = pm.describe()
    if args.json:
        ctx.print_json(described)
        return 0
    for info in described:
        dist = f" [{info['distribution']} {info['version']}]" if info["distribution"] else ""
        ctx.print(f"{info['name']} ({info['origin']}: {info['module']}){dist}")
        ctx.print(f"    hooks: {', '.join(info['hooks']) or '-'}")
    ctx.print("first-result hooks (the first plugin listed answers; the others when it passes):")
    for hook, order in pm.first_result_order().items():
        names = [f"{n} (installed)" if n in pm.autoloaded else n for n in order]
        ctx.print(f"  {hook}: {', then '.join(names)}")
    return 0


def _config_show(args: argparse.Namespace, ctx: CliContext) -> int:
    config = ctx.kernel().config
    if args.json:
        sources = {k: str(v) for k, v in config.sources.locations.items()}
        ctx.print_json({"config": redact(config.to_dict()), "sources": sources})
    else:
        ctx.print(_yaml_text(redact(config.to_dict())))
    return 0


def _config_get(args: argparse.Namespace, ctx: CliContext) -> int:
    config = ctx.kernel().config
    try:
        value = config.get(args.key)
    except (KeyError, AttributeError):
        raise UsageError(f"unknown configuration key {args.key!r}") from None
    last_key = args.key.rsplit(".", 1)[-1]
    plain = redact(json.loads(json.dumps(converter.unstructure(value), default=str)), last_key)
    source = config.source_of(args.key)
    if args.json:
        ctx.print_json(
            {"key": args.key, "value": plain, "source": str(source) if source else "default"}
        )
    else:
        ctx.print(_yaml_text(plain) if isinstance(plain, dict | list) else _scalar(plain))
    return 0


def _scalar(value: Any) -> str:
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _config_set(args: argparse.Namespace, ctx: CliContext) -> int:
    if len(args.value) != 1:
        got = " ".join(args.value) if args.value else "none"
        raise UsageError(
            f"config set takes one VALUE after KEY (got: {got}); quote a value with spaces,"
            " e.g. '[a, b]'"
        )
    value = args.value[0]
    kernel = ctx.kernel()
    changed = kernel.update_config({args.key: parse_scalar(value, key=args.key)})
    if changed:
        ctx.print(f"{args.key} = {value} saved in {kernel.config_file}")
    else:
        ctx.print(f"{args.key} is already {value}; {kernel.config_file} unchanged")
    return 0


def _agents_list(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    rows = []
    for agent_id in kernel.agent_ids():
        agent = kernel.agent(agent_id)
        rows.append(
            {
                "id": agent_id,
                "name": agent.section("name"),
                "enabled": agent.section("enabled"),
                "file": str(agent.file),
            }
        )
    if args.json:
        ctx.print_json(rows)
    elif not rows:
        from soulacy.kernel import AGENT_FILE, AGENTS_DIR

        ctx.print(
            f"no agents in {kernel.workspace} (an agent is {AGENTS_DIR}/ID/{AGENT_FILE};"
            " create one with `soulacy agents new ID`)"
        )
    else:
        for row in rows:
            state = "" if row["enabled"] else " (disabled)"
            ctx.print(f"{row['id']}{state}: {row['name'] or ''}".rstrip(": "))
    return 0


def _agents_new(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    path = new_agent(kernel, args.id, name=args.name, description=args.description)
    ctx.print(f"created {path}")
    return 0


def new_agent(
    kernel: Kernel, agent_id: str, *, name: str | None = None, description: str = ""
) -> Path:
    """Write ``agents/ID/SOUL.yaml`` for a new agent and return its path.

    The agent starts with the workspace provider and its default model, and writes no turn,
    budget, timeout or output limits, so it inherits the workspace policy; ``top_p`` is left to
    the provider. An existing agent is never overwritten.
    """
    if not _AGENT_ID.fullmatch(agent_id):
        raise UsageError(f"agent id {agent_id!r}: expected letters, digits, '-' and '_'")
    from soulacy.kernel import AGENT_FILE, AGENTS_DIR

    path = kernel.workspace / AGENTS_DIR / agent_id / AGENT_FILE
    if path.exists():
        raise UsageError(f"{path} already exists; nothing was written")
    # llm.default is the providers plugin's section: with that plugin blocked, none is written
    default = kernel.config.values.get("llm.default")
    llm = {k: v for k in ("provider", "model") if (v := getattr(default, k, None))}
    doc: dict[str, Any] = {
        "id": agent_id,
        "name": name or agent_id,
        "description": description,
        "system_prompt": "You are a helpful assistant.",
    }
    if llm:
        doc["llm"] = llm
    doc["tools"] = []
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(doc, out)
    atomic_write(path, out.getvalue())
    return path


# -- reading the store: history, runs, runs show --------------------------------------------
# Core commands: they ask the storage hooks, so they work with whichever store answers, and
# name it. Their kernel is read-only (CliCommand.read_only): stores create no file.


def store_label(kernel: Kernel, hook: str, store: Any) -> str:
    """Which store answered ``hook``: the plugin, and where its data is (``describe()``)."""
    _, plugin = kernel.pm.first_result(hook, kernel=kernel)
    if plugin is None or plugin == "memory_store":
        return "memory: no loaded plugin provides a store, so nothing outlives a command"
    describe = getattr(store, "describe", None)
    where = describe() if callable(describe) else None
    return f"{plugin} at {where}" if where else plugin


async def _history(args: argparse.Namespace, ctx: CliContext) -> int:
    of_agent = f" of agent {args.agent!r}" if args.agent else ""
    return await _listing(
        ctx,
        lambda store: _labelled_history(store, args.session, args.agent),
        _entry_line,
        f"no stored messages{of_agent} in session {args.session!r}",
        args.json,
    )


async def _labelled_history(
    store: Any, session_id: str, agent_id: str | None
) -> list[HistoryEntry]:
    """The session's entries, those of a crashed run's last attempt labelled interrupted."""
    from soulacy.kernel.store import label_interrupted

    entries: list[HistoryEntry] = await store.history(session_id, agent_id)
    runs = {
        run_id: await store.get_run(run_id) for run_id in {e.run_id for e in entries if e.run_id}
    }
    return [label_interrupted(e, runs.get(e.run_id) if e.run_id else None) for e in entries]


async def _listing(
    ctx: CliContext,
    read: Callable[[Any], Awaitable[Sequence[Any]]],
    line: Callable[[Any], str],
    empty: str,
    as_json: bool,
) -> int:
    """A read-only listing from the conversation store: JSON, or a line per record, or what
    is empty and which store said so."""
    kernel = ctx.kernel()
    try:
        store = kernel.store()
        records = await read(store)
    finally:
        await kernel.aclose()
    if as_json:
        ctx.print_json([attrs.asdict(r) for r in records])
        return 0
    if not records:
        ctx.print(f"{empty} (store: {store_label(kernel, 'soulacy_store', store)})")
    for record in records:
        ctx.print(line(record))
    return 0


def _entry_line(entry: HistoryEntry) -> str:
    meta = entry.metadata or {}
    notice = ""
    if entry.role == "assistant" and meta:
        notice = f"  [{meta.get('status')}"
        if meta.get("incomplete_reason"):
            notice += f": {meta['incomplete_reason']}"
        if meta.get("verification"):
            notice += f", {meta['verification']}"
        if entry.attempt > 1 or meta.get("status") == "interrupted":
            notice += f", attempt {entry.attempt}"
        notice += "]"
    text = entry.content.replace("\n", " ")
    if entry.tool_calls:
        text = (text + " " if text else "") + ", ".join(
            f"→ {c['name']}({c.get('arguments', {})})" for c in entry.tool_calls
        )
    return f"{entry.role:>9}: {text[:200]}{notice}"


async def _runs(args: argparse.Namespace, ctx: CliContext) -> int:
    of_agent = f" of agent {args.agent!r}" if args.agent else ""
    return await _listing(
        ctx,
        lambda store: store.list_runs(args.limit, args.agent),
        _run_line,
        f"no runs{of_agent}",
        args.json,
    )


def _run_line(run: RunRecord) -> str:
    reason = f" ({run.incomplete_reason})" if run.incomplete_reason else ""
    attempt = f"  attempt {run.attempt}" if run.attempt > 1 else ""
    started = datetime.fromtimestamp(run.started_at).strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"{run.run_id}  {run.agent_id}  session {run.session_id}  {run.status}{reason}"
        f"  {run.verification or '-'}  {started}{attempt}{_lease_note(run)}"
    )


def _shown(key: str, value: Any) -> Any:
    """A metadata value as ``runs show`` prints it: a time (``…_at``, seconds since the
    epoch) as the local date and time with its offset."""
    if key.endswith("_at") and isinstance(value, int | float) and not isinstance(value, bool):
        when = datetime.fromtimestamp(value).astimezone()
        return f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d} {when:%z}"
    return value


def _lease_note(run: RunRecord) -> str:
    """Who held an interrupted run and when it was last heard of (its lease expired, or its
    process is gone): what tells it from a live one."""
    if run.status != "interrupted":
        return ""
    if not run.lease:
        return "  (no owner recorded)"
    owner = run.lease.get("owner") or {}
    heard = run.lease.get("heartbeat_at")
    ago = f", last heartbeat {max(0.0, time.time() - heard):.0f}s ago" if heard else ""
    return f"  (owner pid {owner.get('pid')} on {owner.get('host')}{ago})"


async def _run_show(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        store = kernel.store()
        run = await store.get_run(args.run_id)
        proof = await kernel.store().get_proof(args.run_id) if run else None
    finally:
        await kernel.aclose()
    if run is None:
        label = store_label(kernel, "soulacy_store", store)
        raise UsageError(f"no run {args.run_id!r} in the store ({label})")
    data: dict[str, Any] = {
        "run": attrs.asdict(run),
        "proof": {"sha256": proof.sha256, **proof.data()} if proof else None,
    }
    if args.json:
        ctx.print_json(data)
        return 0
    ctx.print(_run_line(run))
    for key, value in (run.metadata or {}).items():
        ctx.print(f"  {key}: {_shown(key, value)}")
    if proof is not None:
        ctx.print(f"  proof sha256: {proof.sha256} ({proof.receipts} receipts)")
    return 0


async def _run_cancel(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    try:
        store = kernel.store()
        if not store.multi_process:
            label = store_label(kernel, "soulacy_store", store)
            raise UsageError(f"the store ({label}) is not shared: no other process runs from it")
        asked = await kernel.request_cancel(args.run_id, args.reason)
    finally:
        await kernel.aclose()
    if not asked:
        raise UsageError(f"no running run {args.run_id!r} in the store")
    ctx.print(f"asked the owner of run {args.run_id} to cancel it ({args.reason})")
    return 0


# Package data, beside this module in a wheel and in a checkout alike (resolved: an editable
# install's link tree holds only the files that were there when it was made).
TEMPLATE = Path(__file__).resolve().parent / "plugin-template"


def _plugin_new(args: argparse.Namespace, ctx: CliContext) -> int:
    if not TEMPLATE.is_dir():
        raise UsageError(
            f"the plugin template is missing from this installation ({TEMPLATE}): reinstall soulacy"
        )
    dest = Path(args.dest or f"soulacy-{args.name.replace('_', '-')}").resolve()
    if dest.exists():
        raise UsageError(f"{dest} already exists; nothing was written")
    shutil.copytree(TEMPLATE, dest, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    done = subprocess.run(
        [sys.executable, "rename.py", args.name],
        cwd=dest,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(dest)
        raise UsageError(done.stderr.strip() or done.stdout.strip())
    ctx.print(
        f"created {dest}: edit src/soulacy_{args.name}/__init__.py, then"
        " `pip install -e '.[test]' && python -m pytest` in it"
    )
    return 0
