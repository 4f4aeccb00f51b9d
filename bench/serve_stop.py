"""How long an idle ``soulacy serve`` takes to stop on SIGINT and on SIGTERM.

Each repetition starts ``soulacy serve`` on a fresh workspace (HTTP on port 0, an agent with a
schedule, so the builtin services all run), waits for its "serving" line, sends the signal and
takes the wall time from the signal to the process's exit; the signals alternate. Also the time
``open_kernel`` takes to exit with the builtin plugins, in process (what every test that opens a
kernel pays). Figures are medians with (min-max).

    python bench/serve_stop.py              # a table
    python bench/serve_stop.py --json       # one JSON object
    python bench/serve_stop.py --repeat 3   # fewer repetitions
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
CONFIG = "server:\n  port: 0\n"
AGENT = (
    "llm: {provider: scripted, model: script.yaml}\n"
    "schedule: {cron: '0 3 * * *'}\n"  # a schedule: the scheduler runs too
)


def workspace(folder: Path) -> Path:
    (folder / "config.yaml").write_text(CONFIG)
    agent = folder / "agents" / "cron"
    agent.mkdir(parents=True)
    (agent / "SOUL.yaml").write_text(AGENT)
    (agent / "script.yaml").write_text("steps: [{text: ok}]\n")
    return folder


def stop_once(signum: int) -> float:
    """Seconds from ``signum`` to the exit of an idle ``soulacy serve``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    with tempfile.TemporaryDirectory(prefix="soulacy-stop-") as tmp:
        command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(tmp), "serve"]
        workspace(Path(tmp))
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        while line and "soulacy: serving" not in line:
            line = proc.stderr.readline()
        if "soulacy: serving" not in line:
            proc.kill()
            raise SystemExit(f"soulacy serve did not start: {proc.communicate()[1]}")
        sent = time.perf_counter()
        proc.send_signal(signum)
        rest = proc.communicate(timeout=60)[1]
        elapsed = time.perf_counter() - sent
    if proc.returncode != 0 or "soulacy: stopped in" not in rest:
        raise SystemExit(f"soulacy serve did not stop cleanly ({proc.returncode}): {rest}")
    return elapsed


def open_kernel_exit(repeat: int) -> list[float]:
    """Seconds ``open_kernel`` takes to exit with the builtin plugins, nothing running."""
    import trio

    from soulacy.kernel import Kernel, open_kernel

    async def once(folder: Path) -> float:
        kernel = Kernel.load(folder, autoload=False, environ={})
        async with open_kernel(kernel=kernel):
            leaving = time.perf_counter()
        return time.perf_counter() - leaving

    times = []
    for _ in range(repeat):
        quiet = contextlib.redirect_stderr(io.StringIO())  # the keyless server's warning
        with tempfile.TemporaryDirectory(prefix="soulacy-stop-") as tmp, quiet:
            times.append(trio.run(once, workspace(Path(tmp))))
    return times


def summary(times: list[float]) -> dict[str, float]:
    return {"median": statistics.median(times), "min": min(times), "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="stops per signal (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    stops: dict[str, list[float]] = {s.name: [] for s in SIGNALS}
    for _ in range(args.repeat):
        for signum in SIGNALS:
            stops[signum.name].append(stop_once(signum))
    result: dict[str, Any] = {name: summary(times) for name, times in stops.items()}
    result["open_kernel exit"] = summary(open_kernel_exit(args.repeat))
    result["repeat"] = args.repeat
    if args.json:
        print(json.dumps(result))
        return
    print(f"idle stop, {args.repeat} repetitions: median (min-max)")
    for name in (*stops, "open_kernel exit"):
        low, mid, high = (result[name][k] * 1000 for k in ("min", "median", "max"))
        print(f"  {name:<18} {mid:8.1f} ms ({low:.1f}-{high:.1f})")


if __name__ == "__main__":
    main()
