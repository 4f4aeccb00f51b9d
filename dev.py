#!/usr/bin/env python3
"""The quick start: ``python3 dev.py demo`` and ``python3 dev.py test``.

Each command sets up what it needs on first use, with nothing but Python 3.11+ on the machine:
a virtual environment in ``.venv`` with the project installed (editable, strict mode, with its
test dependencies), made again when ``pyproject.toml`` changes. Then:

- ``demo``: ``soulacy demo`` (the main job on embedded defaults; arguments are passed on);
- ``test``: ``python -m pytest`` (arguments are passed on), after making sure the browser the
  portal and EventSource tests drive is there (Debian's ``chromium``, installed with apt-get
  when running as root; otherwise those tests say they were skipped and why);
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
STAMP = VENV / ".soulacy-installed"  # the sha256 of the pyproject.toml it was installed from
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
BROWSER = "/usr/bin/chromium"
TYPED_PACKAGES = ("soulacy.kernel", "soulacy.plugins", "soulacy.contrib", "soulacy.sdk")


def say(text: str) -> None:
    print(f"dev.py: {text}", file=sys.stderr, flush=True)


def run(*args: str | Path, check: bool = True) -> int:
    return subprocess.run([str(a) for a in args], cwd=ROOT, check=check).returncode


def ensure_environment() -> None:
    """Create .venv and install the project into it, unless that was done for this pyproject."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any install
        sys.exit(f"dev.py: Python 3.11 or newer is needed (this is {sys.version.split()[0]})")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == wanted and PYTHON.exists():
        return
    if not PYTHON.exists():
        say(f"creating the virtual environment {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
    say("installing soulacy with its test dependencies (first use, or pyproject.toml changed)")
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


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("help", [])
    if command not in ("demo", "test", "lint"):
        print(__doc__.strip())
        return 0 if command in ("help", "-h", "--help") else 2
    ensure_environment()
    if command == "demo":
        return run(BIN / "soulacy", "demo", *rest, check=False)
    if command == "test":
        ensure_browser()
        return run(PYTHON, "-m", "pytest", *rest, check=False)
    checks: list[list[str | Path]] = [
        [BIN / "ruff", "check", "."],
        [BIN / "ruff", "format", "--check", "."],
        [BIN / "mypy", "--strict", *(arg for p in TYPED_PACKAGES for arg in ("-p", p))],
        [BIN / "mypy", "--strict", "dev.py"],  # mypy takes files or packages, not both
    ]
    return max([run(*check, check=False) for check in checks])  # every check runs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
