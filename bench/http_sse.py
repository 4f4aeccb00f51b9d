"""One SSE connection of the HTTP transport: events/s against a bare ASGI app, and the time
from a model's first token to the client's first byte, over HTTP and in process.

    python bench/http_sse.py [--quick] [--events 20000] [--rounds 5] [--runs 300] [--json]
    python bench/http_sse.py --compare DIR  # also a copy of the package at DIR (before/after)
    python bench/http_sse.py --serve-ticking  # the same-source bare app alone (prints its URL)

The model is the ``ticking`` provider of this file (loaded with ``-p http_sse``): the scripted
model's text deltas, one word each, with no latency, but with a Trio checkpoint after each
delta as a model read from a socket has. (The builtin scripted model yields nowhere while it
streams: a whole reply is emitted before any other task runs, so its stream leaves the server
in one write, which measures nothing per event.)

(a) events/s on one connection. Soulacy: ``soulacy serve`` (a fresh process each round, SQLite
store: the events are also shared through it) streams one reply of ``--events`` deltas of 51
bytes each (``id``, ``event: delta``, the word in JSON); the client (httpx under Trio, loopback)
counts them from the first delta it reads to the last. The bare app: bench/floors.py's
``sse_app`` on ``hypercorn.trio.serve`` sends the same number of 51-byte ``data:`` events, once
one per ``send()`` and once as many per ``send()`` as Soulacy's stream carried per read of the
client in the same round (the same batching), read by the same client code. The same-source
bare app (``ticking_sse_app`` below, served by this file with ``--serve-ticking``) sends the
same events in the same batches, but makes each one as the ticking model does: one Trio
checkpoint per event, so that it pays the event's source as Soulacy's run does; the first
bare app pays nothing for its events, which is the stricter floor. Each server's CPU
time (user + system, /proc) per event is reported too: on a machine shared with other work it
moves far less than events/s.

(b) first-token latency. The model writes the monotonic clock (ns, one clock for every process
of the machine) into its first delta; in process a ``kernel.events`` subscriber reads the first
``text.delta``; over HTTP the client reads the first bytes of that ``delta`` event from
``POST /api/v1/chat/stream`` (one fresh server, requests one after another, after a warm-up).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import trio

from soulacy.kernel import Kernel, hookimpl
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.providers import ProviderConfig, ProviderType, TextSink

BENCH = Path(__file__).resolve().parent
STAMP = re.compile(rb'"text": "t(\d+) ')
STREAMED = (b"event: delta\n", b"event: token\n")  # Soulacy's token events, the bare app's


# -- the model ----------------------------------------------------------------------------------


class TickingModel:
    """Model ``N``: N words (``w000000 ``: 8 characters, a 51-byte delta event while ids have
    five digits). Model ``stamped:N``: the first word is ``t<monotonic ns>``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def capacity(self, model: str | None) -> None:
        return None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        spec = request.model or "40"
        stamped = spec.startswith("stamped:")
        words = int(spec.removeprefix("stamped:"))
        parts = []
        for n in range(words):
            word = f"t{time.monotonic_ns()} " if stamped and n == 0 else f"w{n:06d} "
            parts.append(word)
            if on_text is not None:
                await on_text(word)
                await trio.lowlevel.checkpoint()  # as a read from the model's socket would
        return ModelReply(Message("assistant", "".join(parts)), Usage(0, words), "stop")

    async def aclose(self) -> None:
        return None


def _create(name: str, config: ProviderConfig, kernel: Kernel) -> TickingModel:
    return TickingModel(name)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("ticking", _create)]


def workspace(folder: Path, events: int) -> None:
    from soulacy.testing import Workspace

    space = Workspace(folder)
    space.write_config(
        f"server:\n  port: 0\n  events_per_run: {events + 100}\nscheduler:\n  enabled: false\n"
    )
    space.write_agent("long", {"llm": {"provider": "ticking", "model": str(events)}})
    space.write_agent("stamped", {"llm": {"provider": "ticking", "model": "stamped:40"}})


# -- servers ------------------------------------------------------------------------------------


def start_soulacy(folder: Path, package: Path | None) -> tuple[subprocess.Popen[str], str]:
    sys.path.insert(0, str(BENCH))
    from http_load import serve

    paths = [str(BENCH)] if package is None else [str(package), str(BENCH)]
    return serve(folder, plugins=["http_sse"], pythonpath=paths)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def ticking_sse_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``GET /?n=N&batch=B``: bench/floors.py's ``sse_app`` (N events, B per ``send()``), but
    each event costs what the ticking model's delta costs its source: one Trio checkpoint."""
    sys.path.insert(0, str(BENCH))
    from floors import EVENT, sse_app

    if scope["type"] == "lifespan":
        await sse_app(scope, receive, send)
        return
    query = parse_qs(scope["query_string"].decode())
    n, batch = int(query["n"][0]), int(query["batch"][0])
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    ready = 0
    for made in range(1, n + 1):
        await trio.lowlevel.checkpoint()  # as the ticking model's read from its socket
        ready += 1
        if ready == batch or made == n:
            body = EVENT * ready
            await send({"type": "http.response.body", "body": body, "more_body": True})
            ready = 0
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve_ticking() -> None:
    """Serve ``ticking_sse_app`` as bench/floors.py serves its own app."""
    from floors import serve

    await serve(ticking_sse_app)


def bare_server(ticking: bool = False) -> tuple[subprocess.Popen[str], str]:
    """A bare ASGI SSE app in a process of its own, stopped when stdin closes: bench/floors.py's
    (events from nothing), or with ``ticking`` this file's (one checkpoint per event)."""
    command = [__file__, "--serve-ticking"] if ticking else [str(BENCH / "floors.py"), "serve"]
    proc = subprocess.Popen(
        [sys.executable, *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        raise RuntimeError(f"the bare ASGI server did not start (said {url!r})")
    return proc, url


def stop_bare(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- (a) events per second on one connection ----------------------------------------------------


async def read_events(
    open_stream: Callable[[httpx.AsyncClient], Any],
) -> dict[str, Any]:
    """Counts the token events of one stream: from the first read that completes one to the
    last, and the reads that carried them."""
    first = last = 0.0
    count = reads = size = 0
    tail = b""
    async with (
        httpx.AsyncClient(timeout=300, trust_env=False) as client,
        open_stream(client) as response,
    ):
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            now = time.perf_counter()
            *events, tail = (tail + chunk).split(b"\n\n")
            found = 0
            for event in events:
                if any(name in event for name in STREAMED):
                    found += 1
                    size += len(event) + 2
            if found:
                first = first or now
                last, count, reads = now, count + found, reads + 1
    return {
        "events": count,
        "events_per_s": (count - 1) / (last - first) if count > 1 else 0.0,
        "events_per_read": count / max(1, reads),
        "bytes_per_event": size / max(1, count),
    }


async def stream_soulacy(url: str) -> dict[str, Any]:
    return await read_events(
        lambda client: client.stream(
            "POST", url + "/api/v1/chat/stream", json={"agent_id": "long", "text": "go"}
        )
    )


async def bare_stream(url: str, events: int, batch: int) -> dict[str, Any]:
    return await read_events(
        lambda client: client.stream("GET", url, params={"n": events, "batch": batch})
    )


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux: /proc), robust to a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(pid: int, stream: Callable[..., Awaitable[dict[str, Any]]], *args: Any) -> Any:
    """One stream's figures, with the server's CPU µs per event."""
    before = cpu_seconds(pid)
    found = trio.run(stream, *args)
    found["server_cpu_us_per_event"] = (cpu_seconds(pid) - before) / found["events"] * 1e6
    return found


def one_round(events: int, packages: dict[str, Path | None]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for label, package in packages.items():
        with tempfile.TemporaryDirectory(prefix="soulacy-sse-") as tmp:
            workspace(Path(tmp), events)
            proc, url = start_soulacy(Path(tmp), package)
            try:
                trio.run(stream_soulacy, url)  # warm-up: code paths, the store's tables
                found[label] = measured(proc.pid, stream_soulacy, url)
            finally:
                stop(proc)
        if found[label]["events"] != events:
            raise AssertionError(f"{label}: {found[label]['events']} deltas of {events}")
    proc, url = bare_server()
    try:
        trio.run(bare_stream, url, 1000, 1)  # warm-up
        found["bare_per_send"] = measured(proc.pid, bare_stream, url, events, 1)
        for label in packages:  # as many events per send() as that stream had per read
            batch = max(1, round(found[label]["events_per_read"]))
            found[f"bare_as_{label}"] = measured(proc.pid, bare_stream, url, events, batch)
            found[f"bare_as_{label}"]["batch"] = batch
    finally:
        stop_bare(proc)
    proc, url = bare_server(ticking=True)
    try:
        trio.run(bare_stream, url, 1000, 1)  # warm-up
        for label in packages:  # the same batches, from the same source as Soulacy's model
            batch = found[f"bare_as_{label}"]["batch"]
            found[f"ticking_as_{label}"] = measured(proc.pid, bare_stream, url, events, batch)
            found[f"ticking_as_{label}"]["batch"] = batch
    finally:
        stop_bare(proc)
    return found


# -- (b) first-token latency --------------------------------------------------------------------


async def http_latencies(url: str, runs: int, warm: int) -> list[float]:
    found = []
    async with httpx.AsyncClient(base_url=url + "/api/v1", timeout=60, trust_env=False) as http:
        for n in range(warm + runs):
            received: float | None = None
            buffer = b""
            body = {"agent_id": "stamped", "text": "go", "session_id": f"s{n}"}
            async with http.stream("POST", "/chat/stream", json=body) as response:
                async for chunk in response.aiter_raw():
                    if received is None:
                        buffer += chunk
                        stamp = STAMP.search(buffer)
                        if stamp:
                            received = time.monotonic_ns() - int(stamp.group(1))
            if received is None:
                raise AssertionError("no stamped delta in the stream")
            if n >= warm:
                found.append(received / 1e6)
    return found


async def in_process_latencies(folder: Path, runs: int, warm: int) -> list[float]:
    plugin = sys.modules[__name__]
    kernel = Kernel.load(folder, plugins=["no:http"], extra_plugins=[plugin], environ={})
    found: list[float] = []
    channel = kernel.events.subscribe(math.inf)

    async def first_delta(keep: bool) -> None:
        async for event in channel:
            if event.type == "text.delta" and event.data["text"].startswith("t"):
                if keep:
                    found.append((time.monotonic_ns() - int(event.data["text"][1:])) / 1e6)
                return

    try:
        for n in range(warm + runs):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(first_delta, n >= warm)
                await kernel.run("stamped", "go", session_id=f"s{n}", stream=True)
    finally:
        await kernel.aclose()
    return found


def latencies(runs: int, packages: dict[str, Path | None]) -> dict[str, Any]:
    warm = 10
    found: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="soulacy-sse-") as tmp:
        workspace(Path(tmp), 40)
        found["in_process"] = _summary(trio.run(in_process_latencies, Path(tmp), runs, warm))
    for label, package in packages.items():
        with tempfile.TemporaryDirectory(prefix="soulacy-sse-") as tmp:
            workspace(Path(tmp), 40)
            proc, url = start_soulacy(Path(tmp), package)
            try:
                found[f"http_{label}"] = _summary(trio.run(http_latencies, url, runs, warm))
            finally:
                stop(proc)
    return found


def _summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "runs": len(ms),
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[max(0, math.ceil(len(ms) * 0.99) - 1)],
        "max_ms": ms[-1],
    }


# -- report -------------------------------------------------------------------------------------


def _spread(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    packages: dict[str, Path | None] = {"soulacy": None}
    if args.compare:
        packages["compared"] = Path(args.compare).resolve()
    rounds = [one_round(args.events, packages) for _ in range(args.rounds)]
    out: dict[str, Any] = {"events": args.events, "rounds": args.rounds, "throughput": {}}
    bare = [f"{kind}_as_{label}" for kind in ("bare", "ticking") for label in packages]
    for label in [*packages, "bare_per_send", *bare]:
        out["throughput"][label] = _spread([r[label]["events_per_s"] for r in rounds])
        out["throughput"][label]["events_per_read"] = statistics.median(
            r[label]["events_per_read"] for r in rounds
        )
        out["throughput"][label]["bytes_per_event"] = rounds[0][label]["bytes_per_event"]
        out["throughput"][label]["server_cpu_us_per_event"] = _spread(
            [r[label]["server_cpu_us_per_event"] for r in rounds]
        )
    for label in packages:
        for kind in ("bare", "ticking"):
            key = f"{kind}_as_{label}"
            out["throughput"][key]["batch"] = rounds[-1][key]["batch"]
        for floor in ("bare_per_send", f"bare_as_{label}", f"ticking_as_{label}"):
            ratios = [r[label]["events_per_s"] / r[floor]["events_per_s"] for r in rounds]
            out["throughput"][f"{label}_vs_{floor}"] = _spread(ratios)
    out["first_token"] = latencies(args.runs, packages)
    return out


def table(out: dict[str, Any]) -> str:
    t = out["throughput"]
    lines = [
        f"(a) one SSE connection, {out['events']:,} events of ~51 bytes,"
        f" median of {out['rounds']} rounds (min-max)",
        "",
        "| server | events/s | server CPU µs per event | events per client read |",
        "|---|---|---|---|",
    ]
    names = {
        "soulacy": "Soulacy (soulacy serve, SQLite store)",
        "compared": "Soulacy, compared package",
        "bare_per_send": "bare ASGI app, 1 event per send()",
        **{
            f"bare_as_{label}": f"bare ASGI app, {t[f'bare_as_{label}']['batch']} events per"
            f" send() (as {label})"
            for label in ("soulacy", "compared")
            if f"bare_as_{label}" in t
        },
        **{
            f"ticking_as_{label}": f"same-source bare app: 1 checkpoint per event,"
            f" {t[f'ticking_as_{label}']['batch']} per send() (as {label})"
            for label in ("soulacy", "compared")
            if f"ticking_as_{label}" in t
        },
    }
    for key, name in names.items():
        if key in t:
            v, cpu = t[key], t[key]["server_cpu_us_per_event"]
            lines.append(
                f"| {name} | {v['median']:,.0f} ({v['min']:,.0f}-{v['max']:,.0f}) |"
                f" {cpu['median']:.1f} ({cpu['min']:.1f}-{cpu['max']:.1f}) |"
                f" {v['events_per_read']:.1f} |"
            )
    lines += [
        "",
        "bare_as_*: events from nothing (the stricter floor); ticking_as_*: one checkpoint per"
        " event, as Soulacy's model takes (the same-source floor)",
        "",
        "| ratio | median (min-max) |",
        "|---|---|",
    ]
    for key, v in t.items():
        if "_vs_" in key:
            lines.append(f"| {key} | {v['median']:.2f}x ({v['min']:.2f}-{v['max']:.2f}) |")
    lines += [
        "",
        "(b) first token to first byte (ms)",
        "",
        "| where | runs | p50 | p99 | max |",
        "|---|---|---|---|---|",
    ]
    for key, v in out["first_token"].items():
        lines.append(
            f"| {key} | {v['runs']} | {v['p50_ms']:.3f} | {v['p99_ms']:.3f} | {v['max_ms']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="deltas in the long reply")
    parser.add_argument("--rounds", type=int, default=5, help="fresh servers per figure")
    parser.add_argument("--runs", type=int, default=300, help="runs for the latency")
    parser.add_argument("--quick", action="store_true", help="5,000 events, 2 rounds, 50 runs")
    parser.add_argument("--compare", metavar="DIR", help="a folder holding another soulacy/")
    parser.add_argument("--json", action="store_true", help="JSON only")
    parser.add_argument("--serve-ticking", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_ticking:
        trio.run(serve_ticking)
        return
    if args.quick:
        args.events, args.rounds, args.runs = 5_000, 2, 50
    out = measure(args)
    print(json.dumps(out))
    if not args.json:
        print()
        print(table(out))


if __name__ == "__main__":
    main()
