"""Load on the HTTP/SSE transport: concurrent streaming chats on the scripted model.

    python bench/http_load.py [--clients 200] [--words 40]

Starts ``soulacy serve`` in a process of its own (127.0.0.1, a free port) on a workspace
whose agent streams a reply of ``--words`` words after one tool call, then opens ``--clients``
concurrent ``POST /api/v1/chat/stream`` requests. Every stream must end with a ``result``
event and carry ids 1..n without a gap (no event lost). Reports events per second and the
p50/p99 time to the result event.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import trio

from soulacy.testing import Workspace


def start_server(folder: Path, words: int) -> tuple[subprocess.Popen[str], str]:
    workspace = Workspace(folder)
    workspace.write_config("server:\n  port: 0\nscheduler:\n  enabled: false\n")
    reply = " ".join(f"word{n}" for n in range(words))
    workspace.scripted_agent(
        "talker",
        [{"tool": "echo_back", "arguments": {"x": 1}}, {"text": reply}],
        repeat=True,
        tools=["t.py:echo_back"],
    )
    (folder / "agents" / "talker" / "t.py").write_text(
        "async def echo_back(x: int) -> int:\n    '''Echo.'''\n    return x\n"
    )
    return serve(folder)


def serve(
    folder: Path, plugins: Sequence[str] = (), pythonpath: Sequence[str] = ()
) -> tuple[subprocess.Popen[str], str]:
    """``soulacy serve`` on the workspace ``folder`` in a process of its own (``-p`` each of
    ``plugins``, importable from ``pythonpath`` first): the process and its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(
            [*pythonpath, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        )
    options = [arg for name in plugins for arg in ("-p", name)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "soulacy.cli", *options, "--workspace", str(folder), "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", line)
        if found:
            return proc, found.group(1)
        said.append(line)
    raise RuntimeError("the server did not start: " + "".join(said)[-2000:])


async def load(url: str, clients: int) -> dict[str, Any]:
    times: list[float] = []
    events = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url + "/api/v1", timeout=300, limits=limits) as http:

        async def one(n: int) -> None:
            nonlocal events
            started = time.perf_counter()
            response = await http.post(
                "/chat/stream",
                json={"agent_id": "talker", "text": "talk", "session_id": f"load-{n}"},
            )
            ids = [int(m) for m in re.findall(r"^id: (\d+)$", response.text, re.M)]
            names = re.findall(r"^event: (\S+)$", response.text, re.M)
            assert names[-1] == "result", f"stream {n} did not end with result"
            assert ids == list(range(1, len(ids) + 1)), f"stream {n} lost events: {ids}"
            events += len(ids)
            times.append(time.perf_counter() - started)

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n in range(clients):
                nursery.start_soon(one, n)
        elapsed = time.perf_counter() - started
    times.sort()
    return {
        "clients": clients,
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_s": round(events / elapsed),
        "p50_ms": round(statistics.median(times) * 1000, 1),
        "p99_ms": round(times[max(0, int(len(times) * 0.99) - 1)] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--words", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp), args.words)
        try:
            trio.run(load, url, 20)  # warm-up
            result = trio.run(load, url, args.clients)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    if args.json:
        print(json.dumps(result))
        return
    print("| concurrent streams | events | events/s | p50 to result | p99 to result |")
    print("|---|---|---|---|---|")
    print(
        f"| {result['clients']} | {result['events']:,} | {result['events_per_s']:,} |"
        f" {result['p50_ms']} ms | {result['p99_ms']} ms |"
    )
    print("\nno event lost: every stream carried ids 1..n and ended with its result event")


if __name__ == "__main__":
    main()
