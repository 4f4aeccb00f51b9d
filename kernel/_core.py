"""The essential builtin plugin: core agent keys and the kernel's own subcommands.

It is written exactly like any other plugin, through the same hooks.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from ruamel.yaml import YAML

from ._cli import KEPT_SHOWN, CliCommand, CliContext
from ._config import ConfigSection, Settings, parse_scalar
from ._converter import converter
from ._demo import REQUEST as DEMO_REQUEST
from ._demo import write_demo_workspace
from ._engine import RunResult
from ._errors import ConfigIssue, Location, UsageError
from ._kernel import (
    AGENT_FILE,
    AGENTS_DIR,
    DEFAULT_GRACE_PERIOD,
    Kernel,
    PluginsConfig,
    open_kernel,
)
from ._providers import ProviderConfig
from ._store import HistoryEntry, RunRecord
from ._yamlio import atomic_write
from .hookspecs import hookimpl
from .policy import ModelCapacity

_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@attrs.frozen
class AgentLLM:
    """The ``llm`` key of SOUL.yaml: which model an agent uses and how it samples.

    Omitted values come from the workspace provider; ``top_p`` left out leaves nucleus sampling
    to the provider.
    """

    provider: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None
    allowed_providers: list[str] = attrs.Factory(list)


@attrs.frozen
class DefaultModel:
    """``llm.default`` in config.yaml: the workspace provider and model new agents start with."""

    provider: str | None = None
    model: str | None = None


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [
        ConfigSection("plugins", PluginsConfig, doc="plugins to enable and disable"),
        ConfigSection("llm.default", DefaultModel, doc="provider and model of new agents"),
        ConfigSection(
            "llm.providers", dict[str, ProviderConfig], default=dict, doc="model providers by name"
        ),
        ConfigSection("id", str | None, scope="agent", doc="the agent's id (its folder name)"),
        ConfigSection("name", str | None, scope="agent"),
        ConfigSection("description", str | None, scope="agent"),
        ConfigSection("system_prompt", str | None, scope="agent"),
        ConfigSection("llm", AgentLLM, scope="agent"),
        ConfigSection("tools", list[str], scope="agent", default=list),
        ConfigSection("enabled", bool, scope="agent", default=True),
    ]


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    types = kernel.provider_types()
    issues = []
    for name, provider in config.section("llm.providers").items():
        if provider.type not in types:
            path = f"llm.providers.{name}.type"
            loc = config.source_of(path) or Location(str(config.file))
            known = ", ".join(sorted(types)) or "none"
            message = f"no loaded plugin provides this provider type (known: {known})"
            issues.append(ConfigIssue(loc, path, message, provider.type, True))
    return issues


@hookimpl(trylast=True)
def soulacy_model_capacity(
    kernel: Kernel, provider: str | None, model: str | None
) -> ModelCapacity | None:
    return kernel.model_capacity(provider, model)


@hookimpl
def soulacy_cli_commands() -> Sequence[CliCommand]:
    return [
        CliCommand("serve", "run the kernel and its services until SIGINT or SIGTERM", _serve),
        CliCommand(
            "plugins", "list loaded plugins and the hooks they implement", _plugins, _json_flag
        ),
        CliCommand("config show", "print the effective configuration", _config_show, _json_flag),
        CliCommand("config get", "print one configuration value", _config_get, _configure_get),
        CliCommand(
            "config set",
            "change one value of config.yaml (validated, atomic)",
            _config_set,
            _configure_set,
        ),
        CliCommand("config validate", "check config.yaml and every SOUL.yaml", _config_validate),
        CliCommand(
            "run", "run one request of a conversation and print the reply", _run, _configure_run
        ),
        CliCommand(
            "demo",
            "run the demo agent on the scripted model (no network, no key)",
            _demo,
            _configure_demo,
        ),
        CliCommand(
            "plugin new",
            "start a plugin project from plugin-template/",
            _plugin_new,
            _configure_plugin_new,
        ),
        CliCommand("agents list", "list the workspace's agents", _agents_list, _json_flag),
        CliCommand(
            "history",
            "a conversation's stored messages with their reply metadata",
            _history,
            _configure_history,
            read_only=True,
        ),
        CliCommand(
            "runs", "recent runs and how they ended", _runs, _configure_runs, read_only=True
        ),
        CliCommand(
            "runs show", "one run: metadata and proof", _run_show, _configure_show, read_only=True
        ),
        CliCommand(
            "agents new",
            "create agents/ID/SOUL.yaml that inherits the workspace policy",
            _agents_new,
            _configure_new,
        ),
    ]


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def _configure_get(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", help="dotted key, e.g. runtime.timeouts.run")
    _json_flag(parser)


def _configure_set(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key", help="dotted key, e.g. runtime.default_max_turns")
    # REMAINDER: a value that starts with '-' (-5s, -1) is a value, not an option
    parser.add_argument(
        "value", nargs=argparse.REMAINDER, help="a YAML value: 300, 48h, -1, false, '[a, b]'"
    )


def _yaml_text(data: Any) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump(data, out)
    return out.getvalue().rstrip("\n")


# The signals that stop `serve` and `run`: Ctrl-C, and what systemd, docker and CI send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What a run stopped by a signal records as its reason, and the exit code (128 + the signal).
SIGNAL_REASONS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


async def _next_signal(signals: AsyncIterator[int], ctx: CliContext, doing: str) -> int:
    """Wait for the next stop signal and say what it does (one line on stderr)."""
    async for signum in signals:
        print(f"soulacy: {signal.Signals(signum).name} received, {doing}", file=ctx.err, flush=True)
        return signum
    raise AssertionError("a signal receiver does not end")  # pragma: no cover


async def _serve(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with open_kernel(kernel=kernel):
            names = ", ".join(s.name for s in kernel.services()) or "none"
            print(
                f"soulacy: serving {kernel.workspace} (services: {names}); Ctrl-C stops",
                file=ctx.err,
                flush=True,
            )
            await _next_signal(signals, ctx, "shutting down")
    return 0


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


# Keys whose values are secrets: exact names, or names ending in one of these suffixes. Exact
# matching matters: "max_build_tokens" or "chars_per_token" are settings, not secrets.
SECRET_KEYS = re.compile(
    r"^(api_keys?|tokens?|secrets?|passwords?)$|_(api_key|secret|password|access_token)$",
    re.IGNORECASE,
)


def redact(data: Any, key: str = "") -> Any:
    """Hide the values of secret-looking keys (an API key in config.yaml) from printouts."""
    if isinstance(data, dict):
        if SECRET_KEYS.search(key):  # a mapping of secrets (api_keys: {principal: token})
            return {k: "***" if v else v for k, v in data.items()}
        return {k: redact(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v, key) for v in data]
    if SECRET_KEYS.search(key) and data:
        return "***"
    return data


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


def _config_validate(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    summarized = len(kernel.config.kept) > KEPT_SHOWN  # ctx.kernel() said them in one line
    for warning in kernel.validate_all():
        if warning not in kernel.config.warnings or (
            summarized and warning in map(str, kernel.config.kept)
        ):
            ctx.warn(warning)
    agents = kernel.agent_ids()
    ctx.print(f"ok: {kernel.config_file} and {len(agents)} agent file(s) are valid")
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
        ctx.print(
            f"no agents in {kernel.workspace} (an agent is {AGENTS_DIR}/ID/{AGENT_FILE};"
            " create one with `soulacy agents new ID`)"
        )
    else:
        for row in rows:
            state = "" if row["enabled"] else " (disabled)"
            ctx.print(f"{row['id']}{state}: {row['name'] or ''}".rstrip(": "))
    return 0


def _configure_new(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="agent id: letters, digits, '-' and '_'")
    parser.add_argument("--name", help="display name (default: the id)")
    parser.add_argument("--description", default="", help="one line on what the agent is for")


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
    path = kernel.workspace / AGENTS_DIR / agent_id / AGENT_FILE
    if path.exists():
        raise UsageError(f"{path} already exists; nothing was written")
    default: DefaultModel = kernel.config.section("llm.default")
    llm = {k: v for k, v in (("provider", default.provider), ("model", default.model)) if v}
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
        store = kernel.conversation_store()
        entries = await store.history(args.session, args.agent)
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json([attrs.asdict(e) for e in entries])
        return 0
    if not entries:
        label = store_label(kernel, "soulacy_conversation_store", store)
        of_agent = f" of agent {args.agent!r}" if args.agent else ""
        ctx.print(f"no stored messages{of_agent} in session {args.session!r} (store: {label})")
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
        store = kernel.conversation_store()
        runs = await store.list_runs(args.limit, args.agent)
    finally:
        await kernel.aclose()
    if args.json:
        ctx.print_json([attrs.asdict(r) for r in runs])
        return 0
    if not runs:
        label = store_label(kernel, "soulacy_conversation_store", store)
        of_agent = f" of agent {args.agent!r}" if args.agent else ""
        ctx.print(f"no runs{of_agent} (store: {label})")
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
        store = kernel.conversation_store()
        run = await store.get_run(args.run_id)
        proof = await kernel.proof_store().get_proof(args.run_id) if run else None
    finally:
        await kernel.aclose()
    if run is None:
        label = store_label(kernel, "soulacy_conversation_store", store)
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
        ctx.print(f"  {key}: {value}")
    if proof is not None:
        ctx.print(f"  proof sha256: {proof.sha256} ({proof.receipts} receipts)")
    return 0


# Exit codes of `soulacy run` and `soulacy demo`, by how the run ended.
RUN_EXIT_CODES = {"completed": 0, "failed": 1, "incomplete": 3, "cancelled": 4}


def _configure_run(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", help="agent id")
    parser.add_argument("text", help="the request; '-' reads it from standard input")
    parser.add_argument("--session", help="conversation id (default: a new one)")
    parser.add_argument("--run-id", help="run id (default: a new one)")
    parser.add_argument("--stream", action="store_true", help="print the reply as it arrives")
    parser.add_argument("--json", action="store_true", help="print reply and metadata as JSON")


def _configure_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", metavar="DIR", help="write the demo workspace here and keep it")
    parser.add_argument("--json", action="store_true", help="print reply and metadata as JSON")


async def _run(args: argparse.Namespace, ctx: CliContext) -> int:
    text = args.text
    if text == "-":
        if ctx.inp.isatty():
            print(
                "soulacy: reading the request from standard input; end it with Ctrl-D",
                file=ctx.err,
                flush=True,
            )
        text = ctx.inp.read().rstrip("\n")
        if not text.strip():
            raise UsageError("no request on standard input (TEXT is '-')")
    kernel = ctx.kernel()
    return await _run_and_print(
        kernel,
        ctx,
        args.agent,
        text,
        json_out=args.json,
        session_id=args.session,
        run_id=args.run_id,
        stream=args.stream,
    )


async def _demo(args: argparse.Namespace, ctx: CliContext) -> int:
    with tempfile.TemporaryDirectory(prefix="soulacy-demo-") as tmp:
        folder = write_demo_workspace(Path(args.keep or tmp))
        # Embedded defaults: the builtins and the -p plugins, never what happens to be
        # installed (docs/decisions/0018-first-result-precedence.md), nor SOULACY_* variables.
        kernel = Kernel.load(
            folder,
            plugins=ctx.plugins.cli_plugins,
            autoload=False,
            environ={k: v for k, v in ctx.plugins.environ.items() if not k.startswith("SOULACY_")},
        )
        if not args.json:
            ctx.print(f"demo workspace: {folder}")
            ctx.print(f"request: {DEMO_REQUEST}")
        code = await _run_and_print(
            kernel, ctx, "demo", DEMO_REQUEST, json_out=args.json, show_limits=True
        )
    return code


async def _run_and_print(
    kernel: Kernel,
    ctx: CliContext,
    agent_id: str,
    text: str,
    *,
    json_out: bool,
    show_limits: bool = False,
    **options: Any,
) -> int:
    live = ctx.err.isatty() and not json_out
    limits: dict[str, Any] = {}
    steps: list[str] = []
    events = kernel.events.subscribe(buffer=math.inf)
    stream = bool(options.get("stream"))
    run_id = options.pop("run_id", None) or uuid.uuid4().hex  # known here: a signal cancels it
    stopped: list[int] = []  # the stop signal received, if any
    result = None
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals, trio.CancelScope() as everything:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch, events, ctx, live, limits, steps, stream)
            async with trio.open_nursery() as guard:
                guard.start_soon(
                    _cancel_on_signal, signals, kernel, run_id, ctx, stopped, everything
                )
                try:
                    result = await kernel.run(agent_id, text, run_id=run_id, **options)
                except BaseException:
                    nursery.cancel_scope.cancel()
                    raise
                finally:
                    guard.cancel_scope.cancel()
            # the watcher ends on its own at run.completed, once it has printed everything
    if result is None:  # the run did not stop within the grace period: it was cut short
        return 128 + stopped[0]
    code = _print_result(ctx, result, limits, steps, json_out, show_limits, stream)
    return 128 + stopped[0] if stopped else code


async def _cancel_on_signal(
    signals: AsyncIterator[int],
    kernel: Kernel,
    run_id: str,
    ctx: CliContext,
    stopped: list[int],
    everything: trio.CancelScope,
) -> None:
    """A stop signal cancels the run, which records itself as cancelled with the signal's
    reason; if it has not ended after the grace period (or at a second signal), the command
    is cut short, and the engine still records the run, as cancelled by its caller."""
    signum = await _next_signal(signals, ctx, f"cancelling run {run_id!r}")
    stopped.append(signum)
    reason = SIGNAL_REASONS.get(signal.Signals(signum), "cancelled")
    with trio.move_on_after(DEFAULT_GRACE_PERIOD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_keep_cancelling, kernel, run_id, reason)
            await _next_signal(signals, ctx, "stopping now")
            nursery.cancel_scope.cancel()
    everything.cancel()


async def _keep_cancelling(kernel: Kernel, run_id: str, reason: str) -> None:
    """Cancel the run by its id; until it has one (it is starting) or while it is finishing
    (it has given its id up), try again: a run that finishes meanwhile ends this task."""
    # Polling: the registry offers no event for "this id is reserved now" (a 50 ms wait once).
    while True:
        if kernel.conversations.cancel_run(run_id, reason):
            return
        await trio.sleep(0.05)


def _print_result(
    ctx: CliContext,
    result: RunResult,
    limits: dict[str, Any],
    steps: list[str],
    json_out: bool,
    show_limits: bool,
    stream: bool,
) -> int:
    if json_out:
        ctx.print_json(
            {
                "reply": result.reply,
                "metadata": result.metadata(),
                "limits": limits if show_limits else None,
            }
        )
        return RUN_EXIT_CODES[result.status]
    if steps and show_limits:
        ctx.print("tool calls:")
        for step in steps:
            ctx.print(f"  {step}")
    if not stream:
        ctx.print(result.reply)
    meta = result.metadata()
    ctx.print("")
    ctx.print(
        f"status: {meta['status']}"
        + (f" ({meta['incomplete_reason']})" if meta["incomplete_reason"] else "")
        + f" · verification: {meta['verification']}"
    )
    ctx.print(
        f"turns: {meta['turns']} · model calls: {meta['llm_calls']}"
        f" · tool calls: {meta['tool_calls']} · tokens: {meta['tokens']['total']}"
    )
    ctx.print(f"run: {meta['run_id']} · session: {meta['session_id']}")
    if meta["error"]:
        ctx.print(f"error: {meta['error']}")
    if show_limits:
        ctx.print("limits (resolved execution policy):")
        for name, limit in limits.items():
            if name == "agent_id":
                continue
            value = limit.get("text", limit["value"])
            ctx.print(f"  {name}: {value} ({limit['source']})")
    return RUN_EXIT_CODES[result.status]


async def _watch(
    events: Any,
    ctx: CliContext,
    live: bool,
    limits: dict[str, Any],
    steps: list[str],
    stream: bool,
) -> None:
    tokens = 0
    streamed = False
    calls: dict[str, str] = {}
    async for event in events:
        if event.type == "run.limits":
            limits.update(event.data)
        elif event.type == "tool.result":
            error = " (error)" if event.data["is_error"] else ""
            call = calls.get(event.data["id"], event.data["name"])
            steps.append(f"{call} -> {event.data['preview']}{error}")
        elif event.type == "text.delta" and stream:
            print(event.data["text"], end="", file=ctx.out, flush=True)
            streamed = True
        elif event.type == "llm.call" and streamed:  # each turn's text on a line of its own
            print(file=ctx.out, flush=True)
            streamed = False
        elif event.type == "llm.result":
            tokens += event.data["input_tokens"] + event.data["output_tokens"]
            if live:
                print(
                    f"\r\x1b[Kturn {event.data['turn']} · {tokens} tokens",
                    end="",
                    file=ctx.err,
                    flush=True,
                )
        elif event.type == "tool.call":
            arguments = json.dumps(event.data["arguments"], sort_keys=True)
            calls[event.data["id"]] = f"{event.data['name']}({arguments})"
            if not live:
                continue
            print(
                f"\r\x1b[Kturn {event.data['turn']} · {tokens} tokens · tool {event.data['name']}",
                end="",
                file=ctx.err,
                flush=True,
            )
        elif event.type == "run.completed":
            if live:
                print("\r\x1b[K", end="", file=ctx.err, flush=True)
            if stream:
                print(file=ctx.out)
            return


TEMPLATE = Path(__file__).resolve().parents[1] / "plugin-template"


def _configure_plugin_new(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="plugin name: lowercase letters, digits, underscores")
    parser.add_argument("--dest", help="folder to create (default: ./soulacy-NAME)")


def _plugin_new(args: argparse.Namespace, ctx: CliContext) -> int:
    if not TEMPLATE.is_dir():
        raise UsageError(
            f"the plugin template is not installed here ({TEMPLATE}): copy"
            " plugin-template/ from a Soulacy checkout and run its rename.py"
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
