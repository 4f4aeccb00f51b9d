"""Ownership across processes on one SQLite store: takeover, heartbeats, a shared conversation.

    python bench/ownership.py [--turns 200] [--rounds 3] [--skip-expiry]

- **Takeover of a dead owner.** A child process takes a lease and is killed with SIGKILL.
  The time from the kill until this process holds the lease is measured the way the kernel
  asks (``Leases.acquire``'s polling). On the same host the dead pid is proof at once. For
  "another host", the child runs in its own UTS namespace under another hostname (needs
  ``unshare``), so only the expiry of its lease (the default ``leases.ttl``, 30 s) frees it.
- **Heartbeats.** The cost of one renewal (``renew_leases``, one committed write) and what the
  default heartbeat (every 10 s) costs one held lease per hour.
- **One conversation from two processes.** Turns per second of one conversation driven by two
  processes at once, each waiting its turn through the store's lease queue, beside the same
  number of turns from one process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from soulacy.kernel import Kernel
from soulacy.kernel.store import LeaseOwner
from soulacy.plugins.sqlite_store import SQLiteStore

HOLDER = """
import sys, time, trio
from pathlib import Path
from soulacy.kernel.store import LeaseOwner
from soulacy.plugins.sqlite_store import SQLiteStore

async def main(path):
    store = SQLiteStore(Path(path))
    grant = await store.acquire_lease("bench", LeaseOwner.current("child"), 30.0)
    assert grant.acquired
    print("held", flush=True)
    await trio.sleep(3600)

trio.run(main, sys.argv[1])
"""

DRIVER = """
import json, sys, time, trio
from soulacy.kernel import Kernel

async def main(workspace, tag, count):
    kernel = Kernel.load(workspace)
    try:
        began = time.perf_counter()
        for index in range(count):
            result = await kernel.run("a", f"{tag}-{index}", session_id="S")
            assert result.status == "completed", result
        print(json.dumps(time.perf_counter() - began))
    finally:
        await kernel.aclose()

trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


def takeover(path: Path, prefix: list[str]) -> float:
    """Seconds from the SIGKILL of the holder until this process holds its lease."""
    child = subprocess.Popen(
        [*prefix, sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        killed = time.perf_counter()
        child.send_signal(signal.SIGKILL)
        child.wait()
        return trio.run(_take, path, killed)
    finally:
        if child.poll() is None:
            child.kill()


async def _take(path: Path, killed: float) -> float:
    store, owner, delay = SQLiteStore(path), LeaseOwner.current("bench"), 0.005
    try:
        while not (await store.acquire_lease("bench", owner, 30.0)).acquired:
            await trio.sleep(delay)
            delay = min(delay * 2, 0.25)  # as Leases.acquire polls
        return time.perf_counter() - killed
    finally:
        await store.aclose()


async def renewal_seconds(path: Path, count: int) -> float:
    store = SQLiteStore(path)
    try:
        grant = await store.acquire_lease("renew", LeaseOwner.current("bench"), 30.0)
        assert grant.lease is not None
        lease = grant.lease
        began = time.perf_counter()
        for _ in range(count):
            (lease,) = await store.renew_leases([lease], 30.0)
        return (time.perf_counter() - began) / count
    finally:
        await store.aclose()


def workspace(root: Path) -> Path:
    folder = root / "ws"
    (folder / "agents" / "a").mkdir(parents=True)
    (folder / "agents" / "a" / "script.yaml").write_text(
        'steps:\n- {tool: echo, arguments: {text: "x"}}\n- {text: "done"}\nrepeat: true\n'
    )
    (folder / "agents" / "a" / "tools.py").write_text(
        'def echo(text: str) -> str:\n    """Echoes."""\n    return text\n'
    )
    (folder / "agents" / "a" / "SOUL.yaml").write_text(
        "llm: {provider: scripted, model: agents/a/script.yaml}\ntools: ['tools.py:echo']\n"
    )
    (folder / "config.yaml").write_text("{}\n")
    Kernel.load(folder)  # validates
    return folder


def conversation(folder: Path, processes: int, turns: int) -> float:
    """Model calls per second of one conversation run by ``processes`` processes at once."""
    each = turns // processes
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    began = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(folder), f"p{n}", str(each)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for proc in procs:
        proc.communicate(timeout=600)
        assert proc.returncode == 0
    elapsed = time.perf_counter() - began
    return 2 * each * processes / elapsed  # two model calls (tool, answer) per run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="model calls per conversation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-expiry", action="store_true", help="skip the 30s other-host wait")
    args = parser.parse_args()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        same = [takeover(root / f"same{n}.db", []) for n in range(args.rounds)]
        out["takeover_same_host_ms"] = [round(s * 1000, 1) for s in same]
        if not args.skip_expiry and shutil.which("unshare"):
            other = ["unshare", "-u", "sh", "-c", 'hostname elsewhere && exec "$@"', "sh"]
            out["takeover_other_host_s"] = round(takeover(root / "other.db", other), 2)
        renew = trio.run(renewal_seconds, root / "renew.db", 500)
        out["renewal_us"] = round(renew * 1e6, 1)
        per_hour = 3600 / 10  # the default heartbeat
        out["heartbeat_cost_per_lease_hour_ms"] = round(renew * per_hour * 1000, 1)
        one, two = [], []
        for n in range(args.rounds):  # alternating, fresh processes and stores each time
            one.append(conversation(workspace(root / f"one{n}"), 1, args.turns))
            two.append(conversation(workspace(root / f"two{n}"), 2, args.turns))
        out["one_conversation_turns_per_s"] = {
            "one_process": round(statistics.median(one), 1),
            "two_processes": round(statistics.median(two), 1),
            "rounds": {"one": [round(x, 1) for x in one], "two": [round(x, 1) for x in two]},
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
