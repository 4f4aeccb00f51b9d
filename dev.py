#!/usr/bin/env python3
"""The quick start: ``python3 dev.py demo`` and ``python3 dev.py test``.

Each command sets up what it needs on first use, with nothing but Python 3.11+ on the machine:
a virtual environment in ``.venv`` with the project installed (editable, strict mode, with its
test dependencies), made again when ``pyproject.toml`` changes. Then:

- ``demo``: ``soulacy demo`` (the main job on embedded defaults; arguments are passed on);
- ``test``: ``python -m pytest`` in parallel workers (pytest-xdist; arguments are passed on,
  and ``-n 0`` runs in one process), after making sure the browser the portal and EventSource
  tests drive is there (Debian's ``chromium``, installed with apt-get when running as root;
  otherwise those tests say they were skipped and why). ``test --quick`` is the inner loop: it
  leaves out the browser, PostgreSQL, multi-process and benchmark tests. Bytecode is cached
  for the tests' child processes even where PYTHONDONTWRITEBYTECODE is set (in .venv);
- ``lint``: ``ruff check``, ``ruff format --check`` and ``mypy --strict``, as CI runs them.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".soulacy-installed"  # the sha256 of what it was installed from (see installed_from)
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
BROWSER = "/usr/bin/chromium"
TYPED_PACKAGES = ("soulacy.kernel", "soulacy.plugins", "soulacy.contrib", "soulacy.sdk")
PACKAGE_DIRS = ("kernel", "plugins", "contrib", "sdk")
# What the quick loop leaves out: the markers of tests that need more than this process.
SLOW_MARKERS = ("browser", "postgres", "processes", "bench")


def say(text: str) -> None:
    print(f"dev.py: {text}", file=sys.stderr, flush=True)


def run(*args: str | Path, check: bool = True) -> int:
    return subprocess.run([str(a) for a in args], cwd=ROOT, check=check).returncode


def installed_from() -> str:
    """The sha256 of pyproject.toml and of the package files' names: a strict editable install
    links each file, so a module added since needs the install made again."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    for folder in PACKAGE_DIRS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(ROOT)).encode() + b"\n")
    return digest.hexdigest()


def ensure_environment() -> None:
    """Create .venv and install the project into it, unless that was done for this pyproject."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any install
        sys.exit(f"dev.py: Python 3.11 or newer is needed (this is {sys.version.split()[0]})")
    wanted = installed_from()
    if STAMP.exists() and STAMP.read_text().strip() == wanted and PYTHON.exists():
        return
    if not PYTHON.exists():
        say(f"creating the virtual environment {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
    say("installing soulacy with its test dependencies (first use, or its files changed)")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", ".[dev]", "-C", "editable_mode=strict")
    STAMP.write_text(wanted + "\n")


def ensure_browser() -> None:
    """The browser tests drive Debian's Chromium; install it where this process may."""
    if Path(BROWSER).exists() or os.environ.get("SOULACY_SKIP_BROWSER_INSTALL"):
        return
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        say(f"no {BROWSER}: the browser tests will be skipped (install the chromium package)")
        return
    say("installing Chromium for the browser tests (apt-get install chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in (["update"], ["install", "-y", "chromium"]):
        done = subprocess.run([apt, "-qq", *step], env=env, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            say(f"apt-get {step[0]} failed: the browser tests will be skipped")
            return


def pytest_args(rest: list[str]) -> list[str]:
    """pytest's arguments for ``test``: parallel unless told otherwise, ``--quick`` as markers."""
    args = [arg for arg in rest if arg != "--quick"]
    if len(args) < len(rest):
        args = ["-m", " and ".join(f"not {marker}" for marker in SLOW_MARKERS), *args]
    told = any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in rest)
    if not told:
        args = ["-n", str(workers()), "--dist", "worksteal", *args]
    return args


def workers() -> int:
    """Two per core: most of the suite's time is spent waiting on servers and processes."""
    return 2 * (os.cpu_count() or 1)


def cache_bytecode() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (some CI images set it), let the suite's hundreds of
    child processes share compiled bytecode anyway, kept in .venv, not beside the sources."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        os.environ.setdefault("PYTHONPYCACHEPREFIX", str(VENV / "pycache"))


def replace_with(*args: str | Path) -> int:
    """Run ``args`` in place of this process where the system allows it (a signal sent to
    ``dev.py``, Ctrl-C or a CI's SIGTERM, then reaches pytest itself), else as a child."""
    os.chdir(ROOT)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(args[0], [str(a) for a in args])
    return run(*args, check=False)


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if command not in ("demo", "test", "lint"):
        print(__doc__.strip())
        return 0 if command in ("help", "-h", "--help") else 2
    ensure_environment()
    if command == "demo":
        return replace_with(BIN / "soulacy", "demo", *rest)
    if command == "test":
        ensure_browser()
        cache_bytecode()
        return replace_with(PYTHON, "-m", "pytest", *pytest_args(rest))
    checks: list[list[str | Path]] = [
        [BIN / "ruff", "check", "."],
        [BIN / "ruff", "format", "--check", "."],
        [BIN / "mypy", "--strict", *(arg for p in TYPED_PACKAGES for arg in ("-p", p))],
        [BIN / "mypy", "--strict", "dev.py"],  # mypy takes files or packages, not both
    ]
    return max([run(*check, check=False) for check in checks])  # every check runs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
