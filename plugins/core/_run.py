"""``serve``, ``run`` and ``demo``: a kernel that runs until a signal, and one request printed.

A stop signal (SIGINT, SIGTERM) stops ``serve``; during ``run`` and ``demo`` it cancels the run,
which records itself as cancelled with the signal's reason.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import json
import logging
import math
import os
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import trio

from soulacy.kernel import (
    DEFAULT_GRACE_PERIOD,
    CliContext,
    Kernel,
    RunNotContinuable,
    RunResult,
    UsageError,
    open_kernel,
)

from ._demo import REQUEST as DEMO_REQUEST
from ._demo import write_demo_workspace
from ._reload import watch_workspace

# The signals that stop `serve` and `run`: Ctrl-C, and what systemd, docker and CI send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What a run stopped by a signal records as its reason, and the exit code (128 + the signal).
SIGNAL_REASONS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

log = logging.getLogger("soulacy.core")


def in_workspace(kernel: Kernel) -> contextlib.chdir[Path]:
    """The workspace's folder as the process's working folder for the block, then the caller's
    again: the tools of ``run``, ``demo`` and ``serve`` read and write paths relative to the
    workspace wherever the command was started (docs/running.md#tools). A kernel embedded in
    an application leaves the working folder to the application."""
    return contextlib.chdir(kernel.workspace)


async def _next_signal(signals: AsyncIterator[int], ctx: CliContext, doing: str) -> int:
    """Wait for the next stop signal and say what it does (one line on stderr)."""
    async for signum in signals:
        print(f"soulacy: {signal.Signals(signum).name} received, {doing}", file=ctx.err, flush=True)
        return signum
    raise AssertionError("a signal receiver does not end")  # pragma: no cover


async def _serve(args: argparse.Namespace, ctx: CliContext) -> int:
    overrides = {}  # --host/--port: server.host/port for this process, as environment overrides
    if args.host is not None:
        overrides["SOULACY_SERVER__HOST"] = args.host
    if args.port is not None:
        overrides["SOULACY_SERVER__PORT"] = str(args.port)
    if overrides:
        ctx.plugins = attrs.evolve(ctx.plugins, environ={**ctx.plugins.environ, **overrides})
    kernel = ctx.kernel()
    ready = False
    try:
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals, in_workspace(kernel):
            async with open_kernel(kernel=kernel):
                ready = True
                freeze_startup_heap()
                kernel.start_soon(watch_workspace, kernel, name="soulacy serve: workspace files")
                print(_start_line(kernel), file=ctx.err, flush=True)
                await _next_signal(signals, ctx, "shutting down")
                asked = time.monotonic()
    except (OSError, BaseExceptionGroup) as raised:
        refused = None if ready else _listen_error(raised)
        if refused is None:
            raise
        print(_cannot_listen(kernel, refused), file=ctx.err, flush=True)
        return 2
    print(f"soulacy: stopped in {time.monotonic() - asked:.1f}s", file=ctx.err, flush=True)
    return 0


def freeze_startup_heap() -> None:
    """Take what start-up made (modules, plugins, the kernel and its configuration, the
    services) out of the cyclic collector's generations, once the services run. A server
    allocates for every event it streams (a text delta makes several objects); each full
    collection then walked the whole start-up heap again: about 2 µs of CPU per streamed
    event (docs/performance/0084-serve-freezes-its-start-up-heap.md). What is frozen lives
    for the process anyway: refcounting still frees it, only a cycle of it dropped later (a
    reload) is never collected. Garbage is collected first, so none of it is frozen."""
    gc.collect()
    gc.freeze()


def _listen_error(raised: BaseException) -> OSError | None:
    """The OSError of a service that could not start listening, when that is all that was
    raised (inside exception groups or not); None for anything else."""
    if isinstance(raised, OSError):
        return raised if raised.errno is not None else None
    if not isinstance(raised, BaseExceptionGroup):
        return None
    found, rest = raised.split(OSError)
    if found is None or rest is not None:
        return None
    leaves: list[BaseException] = [found]
    while leaves:
        leaf = leaves.pop(0)
        if isinstance(leaf, BaseExceptionGroup):
            leaves[:0] = leaf.exceptions
        elif isinstance(leaf, OSError) and leaf.errno is not None:
            return leaf
    return None


def _server(kernel: Kernel) -> Any:
    """The HTTP plugin's ``server`` settings, or None when no plugin declares them."""
    try:
        return kernel.config.section("server")
    except (KeyError, AttributeError):
        return None


def _address(host: str, port: object) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _cannot_listen(kernel: Kernel, error: OSError) -> str:
    server = _server(kernel)
    where = _address(server.host, server.port) if server is not None else "the configured address"
    if error.errno == errno.EADDRINUSE:
        why = "address already in use; stop what uses it or pass --port"
    else:
        reason = (error.strerror or os.strerror(error.errno or 0)).lower()
        why = f"{reason}; pass --host or --port"
    return f"soulacy: cannot listen on {where}: {why}"


def _start_line(kernel: Kernel) -> str:
    """``soulacy: serving WORKSPACE (services: …)``, then where the API and the portal are and
    whether keys are required, when the HTTP service runs."""
    names = ", ".join(s.name for s in kernel.services()) or "none"
    line = f"soulacy: serving {kernel.workspace} (services: {names})"
    urls = kernel.started.get("http")
    server = _server(kernel)
    if urls and server is not None:
        base = str(urls[0]).rstrip("/")
        line += f"; API {base}/api/v1"
        if kernel.pm.has_plugin("portal"):
            line += f", portal {base}/"
        keyed = bool(server.api_keys) or bool(server.api_key)
        line += ", API keys required" if keyed else ", keyless: loopback clients only"
    return line + "; Ctrl-C stops"


# Exit codes of `soulacy run` and `soulacy demo`, by how the run ended (docs/cli.md); one for
# every status of the engine (a test holds them together). `interrupted` (the kernel stopped,
# reason `shutdown`) is 75, EX_TEMPFAIL: the run is resumable, try again.
RUN_EXIT_CODES = {
    "completed": 0,
    "failed": 1,
    "incomplete": 3,
    "cancelled": 4,
    "interrupted": 75,
}


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


async def _continue(args: argparse.Namespace, ctx: CliContext) -> int:
    kernel = ctx.kernel()
    overrides: dict[str, Any] = {}
    if args.max_turns is not None:
        overrides["max_turns"] = args.max_turns
    if args.run_timeout is not None:
        overrides["run_timeout"] = args.run_timeout
    stored = await kernel.store().get_run(args.run_id)
    if stored is None or stored.status != "incomplete":
        await kernel.aclose()
        raise RunNotContinuable(args.run_id, None if stored is None else stored.status)
    return await _run_and_print(
        kernel,
        ctx,
        stored.agent_id,
        args.text,
        json_out=args.json,
        session_id=stored.session_id,
        run_id=stored.run_id,
        user_id=stored.user_id,
        principal=stored.principal,
        overrides=overrides,
        stream=args.stream,
        continues=True,
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
    """Run once, with the services runs need (the mcp plugin's servers that this agent lists;
    never the HTTP transport or the scheduler), and print how it ended; then close the kernel,
    so that every plugin's ``soulacy_unconfigure`` runs (a store closes, a tracer flushes its
    spans)."""
    code: int | None = None
    kernel.agents_to_run = frozenset({agent_id})  # only its MCP servers start
    try:
        with in_workspace(kernel):
            async with open_kernel(kernel=kernel, services="runs"):
                code = await _run_once(kernel, ctx, agent_id, text, json_out, show_limits, options)
    except Exception as exc:
        if code is None:
            if _only_broken_pipes(exc):  # `soulacy run … | head`: the launcher ends quietly
                raise BrokenPipeError(errno.EPIPE, "the reader of the output went away") from None
            raise
        # The run is over and said so: a plugin (or service) failing to close is a warning.
        log.warning("closing the kernel after the run failed: %s: %s", type(exc).__name__, exc)
    assert code is not None
    return code


def _only_broken_pipes(raised: BaseException) -> bool:
    """A BrokenPipeError, alone or as every member of (nested) exception groups."""
    if isinstance(raised, BaseExceptionGroup):
        _, rest = raised.split(BrokenPipeError)
        return rest is None
    return isinstance(raised, BrokenPipeError)


async def _run_once(
    kernel: Kernel,
    ctx: CliContext,
    agent_id: str,
    text: str,
    json_out: bool,
    show_limits: bool,
    options: dict[str, Any],
) -> int:
    live = ctx.err.isatty() and not json_out
    limits: dict[str, Any] = {}
    events = kernel.events.subscribe(buffer=math.inf)
    stream = bool(options.get("stream"))
    run_id = options.pop("run_id", None) or uuid.uuid4().hex  # known here: a signal cancels it
    stopped: list[int] = []  # the stop signal received, if any
    result = None
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals, trio.CancelScope() as everything:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch, events, ctx, live, limits, stream, json_out)
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
    code = _print_result(ctx, result, limits, json_out, show_limits, stream)
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
        if kernel.cancel_run(run_id, reason):
            return
        await trio.sleep(0.05)


def _print_result(
    ctx: CliContext,
    result: RunResult,
    limits: dict[str, Any],
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
    stream: bool,
    json_out: bool,
) -> None:
    """Follow the run's events: each tool call is printed on stdout once its result is in
    (``→ name(arguments) -> result``), the streamed text as it arrives, and on a terminal a
    progress line on stderr (turn, tokens, tool)."""
    tokens = 0
    streamed = False  # streamed text is on the current line of stdout
    calls: dict[str, str] = {}
    clear = "\r\x1b[K" if live else ""
    async for event in events:
        if event.type == "run.limits":
            limits.update(event.data)
        elif event.type == "tool.result" and not json_out:
            error = "" if not event.data["is_error"] or _says_error(event.data) else " (error)"
            call = calls.get(event.data["id"], event.data["name"])
            if clear:
                print(clear, end="", file=ctx.err, flush=True)
            start = "\n" if streamed else ""
            print(f"{start}→ {call} -> {event.data['preview']}{error}", file=ctx.out, flush=True)
            streamed = False
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
                    f"{clear}turn {event.data['turn']} · {tokens} tokens",
                    end="",
                    file=ctx.err,
                    flush=True,
                )
        elif event.type == "tool.approval" and event.data.get("status") == "pending":
            # Said even with --json (on stderr): otherwise the command just seems to hang.
            run, call = event.run_id, event.data["id"]
            happened = (  # a call cut while it ran may have happened (decision 0081)
                f", or `soulacy runs happened {run} {call} --result TEXT`"
                if event.data.get("cut")
                else ""
            )
            print(
                f"{clear}soulacy: run {run} waits for approval of call {call} (tool"
                f" {event.data['name']}): `soulacy runs approve {run} {call}` or"
                f" `soulacy runs deny {run} {call}`{happened}",
                file=ctx.err,
                flush=True,
            )
        elif event.type == "tool.call":
            arguments = json.dumps(event.data["arguments"], sort_keys=True)
            calls[event.data["id"]] = f"{event.data['name']}({arguments})"
            if not live:
                continue
            print(
                f"{clear}turn {event.data['turn']} · {tokens} tokens · tool {event.data['name']}",
                end="",
                file=ctx.err,
                flush=True,
            )
        elif event.type in ("run.completed", "run.suspended"):  # its decision resumes it
            if live:
                print(clear, end="", file=ctx.err, flush=True)
            if stream:
                print(file=ctx.out)
            return


def _says_error(data: Any) -> bool:
    """Whether a failed call's preview already says so (``error: …``)."""
    return str(data.get("preview", "")).startswith("error")
