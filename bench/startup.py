"""Start-up: ``soulacy --help``, ``soulacy plugins``, ``soulacy demo`` and ``import soulacy.kernel``
as ratios to ``python -c pass``, each a fresh process, repeated, the commands alternating.

Runs in the project's venv. Every repetition runs each command once, in an order that rotates
from one repetition to the next, in an empty temporary folder (not a workspace) with no
``SOULACY_*`` variables. Bytecode is cached as an installed package has it: the processes
share a private ``PYTHONPYCACHEPREFIX`` (``PYTHONDONTWRITEBYTECODE`` is dropped), filled by an
untimed first run of each command; ``--no-bytecode-cache`` sets ``PYTHONDONTWRITEBYTECODE=1``
instead, so that every process compiles Soulacy's modules from source. The wall time of each
process is taken from just before it is spawned to just after it exits. Figures are medians
with (min-max); the ratio is each command's median over the median of ``python -c pass``
measured in the same repetitions. Also, once per command,
whether the process imported trio or httpx (the goal: ``--help`` and ``plugins`` import neither).

    python bench/startup.py                  # a table
    python bench/startup.py --json           # one JSON object (what bench/run_peers.py reads)
    python bench/startup.py --repeat 30 --demo-repeat 5
    python bench/startup.py --no-bytecode-cache   # every process compiles soulacy's sources
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEAVY = ("trio", "httpx")


def soulacy_command() -> list[str]:
    """The installed console script next to this Python, else ``python -m soulacy.cli``."""
    script = Path(sys.executable).parent / "soulacy"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "soulacy.cli"]  # pragma: no cover - not installed


def commands() -> dict[str, list[str]]:
    cli = soulacy_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import soulacy.kernel": [sys.executable, "-c", "import soulacy.kernel"],
        "from soulacy.kernel import hookimpl, CliCommand": [
            sys.executable,
            "-c",
            "from soulacy.kernel import hookimpl, CliCommand",
        ],
        "soulacy --help": [*cli, "--help"],
        "soulacy plugins": [*cli, "plugins"],
        "soulacy demo": [*cli, "demo"],
    }


# What each command imports, checked once in a process of its own (not timed).
_PROBE = """
import sys
argv = sys.argv[1:]
if argv[0] == "-c":
    exec(argv[1])
else:
    from soulacy.cli import main
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv[1:])
        except SystemExit:
            pass
print(",".join(m for m in HEAVY if m in sys.modules))
""".replace("HEAVY", repr(HEAVY))


def env(pycache: Path | None) -> dict[str, str]:
    """The processes' environment: no ``SOULACY_*``; bytecode cached under ``pycache`` (None:
    not written at all)."""
    drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")
    out = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_") and k not in drop}
    if pycache is None:
        out["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        out["PYTHONPYCACHEPREFIX"] = str(pycache)
    return out


def time_once(command: list[str], cwd: Path, environ: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return took


def imported(name: str, command: list[str], cwd: Path, environ: dict[str, str]) -> list[str]:
    if name == "python -c pass":
        return []
    args = command[1:] if command[0] == sys.executable else ["soulacy", *command[1:]]
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return [m for m in line.split(",") if m]


def measure(
    repeat: int, demo_repeat: int, only: list[str] | None = None, bytecode_cache: bool = True
) -> dict[str, Any]:
    chosen = {
        k: v for k, v in commands().items() if only is None or k in only or k.endswith("pass")
    }
    if demo_repeat <= 0:
        chosen.pop("soulacy demo", None)
    scratch = Path(tempfile.mkdtemp(prefix="soulacy-startup-"))
    folder = scratch / "cwd"
    folder.mkdir()
    environ = env(scratch / "pycache" if bytecode_cache else None)
    try:
        for command in chosen.values():  # once each, untimed: page cache and bytecode filled
            time_once(command, folder, environ)
        times: dict[str, list[float]] = {name: [] for name in chosen}
        names = list(chosen)
        for index in range(repeat):
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                if name == "soulacy demo" and index >= demo_repeat:
                    continue
                times[name].append(time_once(chosen[name], folder, environ))
        heavy = {name: imported(name, command, folder, environ) for name, command in chosen.items()}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = statistics.median(times["python -c pass"])
    rows = {}
    for name, values in times.items():
        median = statistics.median(values)
        rows[name] = {
            "median_ms": median * 1e3,
            "min_ms": min(values) * 1e3,
            "max_ms": max(values) * 1e3,
            "runs": len(values),
            "ratio": median / base,
            "imports": heavy[name],
        }
    return {
        "repeat": repeat,
        "bytecode_cache": bytecode_cache,
        "commands": rows,
        "python": sys.version.split()[0],
        "load": os.getloadavg(),
    }


def render(data: dict[str, Any]) -> str:
    lines = [
        "| command | median ms (min-max) | runs | / `python -c pass` | imports trio/httpx |",
        "|---|---|---|---|---|",
    ]
    for name, row in data["commands"].items():
        lines.append(
            f"| `{name}` | {row['median_ms']:,.1f} ({row['min_ms']:,.1f}-{row['max_ms']:,.1f})"
            f" | {row['runs']} | {row['ratio']:.1f}x | {', '.join(row['imports']) or 'neither'} |"
        )
    cache = (
        "cached" if data.get("bytecode_cache", True) else "not cached (PYTHONDONTWRITEBYTECODE=1)"
    )
    lines.append(f"\nbytecode: {cache}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="repetitions of each command")
    parser.add_argument("--demo-repeat", type=int, default=5, help="of them, for soulacy demo")
    parser.add_argument("--only", help="comma-separated command names (python -c pass is kept)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="PYTHONDONTWRITEBYTECODE=1: every process compiles soulacy's modules from source",
    )
    args = parser.parse_args(argv)
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    data = measure(args.repeat, args.demo_repeat, only, not args.no_bytecode_cache)
    print(json.dumps(data) if args.json else render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
