#!/usr/bin/env python3
"""The quick start: ``python3 dev.py demo`` and ``python3 dev.py test``.

Each command sets up what it needs on first use, with nothing but Python 3.11+ on the machine:
a virtual environment in ``.venv`` with the project installed (editable, strict mode, with its
test dependencies), made again when ``pyproject.toml`` changes; it says each step and how far
it has got, and keeps pip's whole output in ``.venv/pip-install.log``. Then:

- ``demo``: ``soulacy demo`` (the main job on embedded defaults; arguments are passed on);
- ``test``: ``python -m pytest`` in parallel workers (pytest-xdist; arguments are passed on,
  and ``-n 0`` runs in one process), after making sure the browser the portal and EventSource
  tests drive is there (Debian's ``chromium``, installed with apt-get when running as root;
  otherwise those tests say they were skipped and why), and, where npm is, the npm packages
  some tests drive (the official AG-UI client, axe-core; in ``.venv``). ``test --quick`` is the
  inner loop: it leaves out the browser, PostgreSQL, multi-process and benchmark tests. Bytecode
  is cached for the tests' child processes even where PYTHONDONTWRITEBYTECODE is set (in .venv);
- ``lint``: ``ruff check``, ``ruff format --check`` and ``mypy --strict``, as CI runs them.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".soulacy-installed"  # the sha256 of what it was installed from (see installed_from)
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
BROWSER = "/usr/bin/chromium"
TYPED_PACKAGES = (
    "soulacy.kernel",
    "soulacy.cli",
    "soulacy.plugins",
    "soulacy.contrib",
    "soulacy.sdk",
    "soulacy.testing",
)
PACKAGE_DIRS = ("kernel", "cli", "plugins", "contrib", "sdk", "testing")
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
    first = not PYTHON.exists()
    if first:
        say(f"creating the virtual environment {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
    install(first)
    STAMP.write_text(wanted + "\n")


def pip_install_command() -> list[str]:
    return [str(PYTHON), "-m", "pip", "install", "-e", ".[dev]", "-C", "editable_mode=strict"]


class PipProgress:
    """pip's output, a line at a time, told as its few top-level steps: preparing the build,
    collecting packages (with a count), building, installing. On a terminal one line is
    rewritten in place; elsewhere (CI, a pipe) each step is one line."""

    STEPS = (
        ("Installing build dependencies", "preparing soulacy's build"),
        ("Building wheels for collected packages", "building soulacy"),
    )

    def __init__(self, out: TextIO, tty: bool) -> None:
        self.out, self.tty = out, tty
        self.collected = 0
        self.installing = 0
        self._shown = ""  # the line a terminal shows now (rewritten in place)
        self._said: set[str] = set()

    def feed(self, line: str) -> None:
        line = line.strip()
        for start, step in self.STEPS:
            if line.startswith(start) and step not in self._said:
                self._said.add(step)
                self._show(step)
        if line.startswith("Collecting "):
            self.collected += 1
            name = line.split()[1]
            if self.tty:
                self._show(f"collecting packages: {self.collected} ({name})")
            elif self.collected == 1 or self.collected % 25 == 0:
                self._show(f"collecting packages: {self.collected} so far")
        elif line.startswith("Installing collected packages:"):
            self.installing = len(line.partition(":")[2].split(","))
            self._show(f"installing {self.installing} packages")

    def _show(self, text: str) -> None:
        text = f"dev.py:   {text}"
        if self.tty:
            pad = " " * max(0, len(self._shown) - len(text))
            self.out.write(f"\r{text}{pad}")
            self._shown = text
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def end(self) -> None:
        if self.tty and self._shown:
            self.out.write("\n")
            self.out.flush()
            self._shown = ""


def install(first: bool) -> None:
    """``pip install -e .[dev]`` into .venv, saying what it does; pip's output goes to
    .venv/pip-install.log (and its end to stderr when it fails)."""
    took = "about a minute on a first run" if first else "usually well under a minute"
    log = VENV / "pip-install.log"
    say(
        "installing soulacy and its test dependencies into .venv"
        f" ({took}; pip's output: {log.relative_to(ROOT) if log.is_relative_to(ROOT) else log})"
    )
    started = time.monotonic()
    progress = PipProgress(sys.stderr, sys.stderr.isatty())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # pip's lines as they come, not in blocks
    with (
        log.open("w", encoding="utf-8") as kept,
        subprocess.Popen(
            pip_install_command(),
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
        ) as pip,
    ):
        assert pip.stdout is not None
        for line in pip.stdout:
            kept.write(line)
            progress.feed(line)
        code = pip.wait()
    progress.end()
    if code != 0:
        tail = log.read_text(encoding="utf-8").splitlines()[-30:]
        print("\n".join(tail), file=sys.stderr, flush=True)
        say(f"pip install failed (exit {code}); its whole output is in {log}")
        sys.exit(1)
    count = f"{progress.installing} packages" if progress.installing else "soulacy"
    say(f"installed {count} in {time.monotonic() - started:.0f}s")


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


# Tests that check against JavaScript packages from npm: the official AG-UI client (pinned by
# its package-lock.json) and axe-core for the portal's accessibility; installed in .venv.
AGUI_CLIENT = ROOT / "tests" / "plugins" / "agui" / "js"
AXE = "axe-core@4.14.1"


def ensure_node_packages() -> None:
    """Install the npm packages some tests drive, where npm is; without it those tests skip."""
    npm = shutil.which("npm")
    if npm is None:
        say("no npm: the AG-UI client and axe-core tests will be skipped (install Node.js 20+)")
        return
    client = VENV / "agui-client"
    if not (client / "node_modules" / "@ag-ui" / "client").is_dir():
        client.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(AGUI_CLIENT / name, client / name)
        say("installing the official AG-UI client for its tests (npm ci)")
        npm_quietly(npm, "ci", "--prefix", str(client))
    axe = VENV / "axe" / "node_modules" / "axe-core" / "axe.min.js"
    if not axe.exists():
        say(f"installing {AXE} for the portal's accessibility test (npm install)")
        npm_quietly(npm, "install", "--no-save", "--prefix", str(VENV / "axe"), AXE)
    if axe.exists():
        os.environ.setdefault("SOULACY_AXE_JS", str(axe))


def npm_quietly(npm: str, *args: str) -> None:
    done = subprocess.run(
        [npm, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    if done.returncode != 0:
        say(f"npm {args[0]} failed (its tests will be skipped): {done.stderr.decode()[-300:]}")


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
        ensure_node_packages()
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
