"""``soulacy mcp serve --stdio``: the workspace's agents as MCP tools over standard input and
output, for desktop clients that start their MCP servers as processes.

The kernel runs the services runs need (the ``mcp`` plugin's servers; never the HTTP port or
the scheduler), as for ``soulacy run``, and its runs have no principal, as ``soulacy run``'s.
Standard output carries the protocol only: the SDK points file descriptor 1 at standard error
while it serves, so a stray ``print`` of a plugin cannot corrupt it. The server ends when the
client closes standard input, or at SIGINT or SIGTERM (a call in flight is cancelled, and its
run recorded as cancelled).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

import trio

from soulacy.kernel import CliContext, UsageError, open_kernel

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _import_sdk() -> None:
    import mcp.server.stdio  # noqa: F401

    from . import _tools  # noqa: F401


class _Lines:
    """Standard input's lines, read with Trio (the SDK's own reader blocks a worker thread
    that no cancellation reaches: a stop signal would wait for the next line)."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.stream = stream
        self.pending = b""

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while b"\n" not in self.pending:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                if not self.pending:
                    raise StopAsyncIteration
                line, self.pending = self.pending, b""
                return line.decode("utf-8", errors="replace")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", errors="replace") + "\n"


async def serve_stdio(args: argparse.Namespace, ctx: CliContext) -> int:
    if not args.stdio:
        raise UsageError(
            "expected --stdio: this command serves MCP over standard input and output;"
            " `soulacy serve` serves it over streamable HTTP, at /mcp"
        )
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("the MCP SDK is not installed: pip install 'soulacy[mcp]'")
    kernel = ctx.kernel()
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with open_kernel(kernel=kernel, services="runs"):
            # Importing the SDK takes seconds: not on the Trio thread (decision 0033).
            await trio.to_thread.run_sync(_import_sdk)
            from ._tools import agents_server, usable_agents

            count = len(usable_agents(kernel, None))
            print(
                f"soulacy: serving {count} agent{'' if count == 1 else 's'} of"
                f" {kernel.workspace} as MCP tools over stdio; closing standard input stops",
                file=ctx.err,
                flush=True,
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope, ctx)
                await _serve(agents_server(kernel, lambda _ctx: None))
                nursery.cancel_scope.cancel()
    return 0  # as `soulacy serve`: a stop signal is how a server is meant to end


async def _serve(server: Any) -> None:
    from mcp.server.stdio import stdio_server

    stdin: Any = None
    stream = None
    if sys.platform != "win32":
        stream = trio.lowlevel.FdStream(os.dup(0))
        stdin = _Lines(stream)
    try:
        async with stdio_server(stdin=cast(Any, stdin)) as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        if stream is not None:
            await stream.aclose()


async def _stop_on_signal(
    signals: AsyncIterator[int], scope: trio.CancelScope, ctx: CliContext
) -> None:
    async for signum in signals:
        name = signal.Signals(signum).name
        print(f"soulacy: {name} received, stopping the MCP server", file=ctx.err, flush=True)
        scope.cancel()
        return
