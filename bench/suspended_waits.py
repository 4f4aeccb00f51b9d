"""What a run suspended while it waits for approval costs, and how soon a decision sent to
another process resumes it (docs/approvals.md#suspended-waits).

1. In process, on a SQLite file, with room for one run of the principal at a time: N runs each
   ask for approval of one call and are suspended (``approvals.suspend_after: 1ms``). Reported:
   the memory the process keeps per suspended run (``tracemalloc``, after a collection, and the
   RSS growth), over all runs and over the second half (by then the HTTP plugin's bounded
   cache of the last 1,000 runs' events, kept for reconnections, is full), and the runs still
   holding a task or slot (expected 0).
2. Two ``soulacy serve`` processes on one SQLite file: a run suspended on the first, then
   approved on the second (``POST /chat/confirm``); reported is the time from sending the
   decision to the resumed run's ``result`` read from ``GET /runs/{id}/events`` there.

    python bench/suspended_waits.py                 # 3,000 runs, 5 resumes
    python bench/suspended_waits.py --runs 200 --resumes 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import trio

CONFIG = {
    "runtime": {"max_concurrent_sessions_per_principal": 1},
    "approvals": {"suspend_after": "1ms"},
    "leases": {"cancel_poll": "200ms"},
    "server": {"port": 0},
}
SCRIPT = "steps:\n  - {tool: delete, arguments: {path: a.txt}, id: c1}\n  - {text: deleted}\n"
SOUL = (
    "name: gated\nllm: {provider: scripted, model: agents/gated/script.yaml}\n"
    "tools: [tools.py:delete]\nconfirm_tools: [delete]\n"
)
TOOLS = 'def delete(path: str) -> str:\n    """Delete a file (says so only)."""\n    return path\n'


def workspace(folder: Path) -> Path:
    (folder / "agents").mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps(CONFIG))
    agent = folder / "agents" / "gated"
    agent.mkdir()
    (agent / "SOUL.yaml").write_text(SOUL)
    (agent / "script.yaml").write_text(SCRIPT)
    (agent / "tools.py").write_text(TOOLS)
    return folder


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def suspend_many(folder: Path, runs: int) -> dict[str, Any]:
    from soulacy.kernel import Kernel, open_kernel

    kernel = Kernel.load(folder, environ={})
    async with open_kernel(kernel=kernel, services="runs"):
        for n in range(5):  # warm: imports, statements, caches
            await kernel.run("gated", "clean up", run_id=f"warm{n}", principal="alice")
        gc.collect()
        tracemalloc.start()
        before, rss_before = tracemalloc.get_traced_memory()[0], rss_kb()
        began = time.perf_counter()
        statuses: dict[str, int] = {}
        middle = 0
        for n in range(runs):
            if n == runs // 2:
                gc.collect()
                middle = tracemalloc.get_traced_memory()[0]
            result = await kernel.run("gated", "clean up", run_id=f"W{n}", principal="alice")
            key = f"{result.status} ({result.incomplete_reason})"
            statuses[key] = statuses.get(key, 0) + 1
        took = time.perf_counter() - began
        gc.collect()
        after, rss_after = tracemalloc.get_traced_memory()[0], rss_kb()
        tracemalloc.stop()
        holding = sum(kernel.runner().holder(f"W{n}") is not None for n in range(runs))
    return {
        "runs": runs,
        "statuses": statuses,
        "ms_per_run": round(took / runs * 1000, 2),
        "bytes_kept_per_run": round((after - before) / runs),
        # the second half, once the HTTP plugin's cache of the last 1,000 runs' events is full
        "bytes_kept_per_run_second_half": round((after - middle) / (runs - runs // 2)),
        "rss_kb_growth": rss_after - rss_before,
        "runs_holding_a_task": holding,
    }


def serve(folder: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(folder), "serve"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    url = None
    for line in proc.stderr:
        found = re.search(r"API (http://127\.0\.0\.1:\d+/api/v1)", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        proc.kill()
        raise SystemExit(f"soulacy serve did not start: {proc.communicate()[1]}")
    return proc, url


def resume_elsewhere(folder: Path, resumes: int) -> list[float]:
    one, first = serve(folder)
    other, second = serve(folder)
    took = []
    try:
        with httpx.Client(timeout=60) as client:
            for n in range(resumes):
                body = {"agent_id": "gated", "text": "clean up", "run_id": f"X{n}"}
                ended = client.post(f"{first}/chat", json=body).json()
                assert ended["metadata"]["incomplete_reason"] == "awaiting_approval", ended
                sent = time.perf_counter()
                confirm = {"run_id": f"X{n}", "call_id": "c1", "approved": True}
                decided = client.post(f"{second}/chat/confirm", json=confirm).json()
                assert decided["resumed"] is True, decided
                with client.stream("GET", f"{second}/runs/X{n}/events") as events:
                    for line in events.iter_lines():
                        if line == "event: result":
                            break
                took.append(time.perf_counter() - sent)
    finally:
        for proc in (one, other):
            proc.terminate()
            proc.communicate(timeout=60)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--resumes", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soulacy-suspended-") as tmp:
        held = trio.run(suspend_many, workspace(Path(tmp) / "a"), args.runs)
        waits = resume_elsewhere(workspace(Path(tmp) / "b"), args.resumes)
    print(json.dumps(held, indent=2))
    median = statistics.median(waits)
    print(
        f"decision on another process to the resumed run's result: median {median * 1000:.0f} ms"
        f" ({min(waits) * 1000:.0f}-{max(waits) * 1000:.0f}) over {len(waits)}"
    )


if __name__ == "__main__":
    main()
