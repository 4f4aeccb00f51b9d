"""Stops what a test run left running, however the run ended.

``_support.guard`` starts this script when a pytest run begins, with a pipe on its standard input
that only the pytest process holds, and marks the run's environment with ``PYTEST_GUARD_RUN``.
Every process the tests start inherits the mark: xdist workers, embedded PostgreSQL servers
(daemons that outlive their parent), ``soulacy serve`` processes, model doubles, browsers. When
the pytest process ends — normally, on SIGINT or SIGTERM, or killed — the pipe closes, and this
script stops every process still carrying the run's mark (SIGTERM, then SIGKILL after
``PATIENCE`` seconds) and prints one line for each; then it removes the folders listed in the
file named by ``PYTEST_GUARD_FOLDERS`` (one path a line: a server's data that its own clean-up
did not get to remove), and that file. Linux only (it reads ``/proc``); standard library only,
and in a session of its own so that a Ctrl-C meant for the run does not stop it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

MARK = "PYTEST_GUARD_RUN"
FOLDERS = "PYTEST_GUARD_FOLDERS"
PATIENCE = 3.0  # seconds between SIGTERM and SIGKILL
ROUNDS = 3  # a process stopped may have started another before it went


def marked(token: str) -> dict[int, str]:
    """The live processes carrying ``token``'s mark: pid -> command line."""
    needle = f"{MARK}={token}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:  # a zombie's is empty
                if needle not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry)] = command
    return found


def signal_each(pids: dict[int, str], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):  # gone meanwhile
            os.kill(pid, signum)


def stop(token: str) -> list[str]:
    """Stop every process marked with ``token``; what was stopped, one line each."""
    stopped: list[str] = []
    for _ in range(ROUNDS):
        found = marked(token)
        if not found:
            break
        stopped += [f"{pid} {command}" for pid, command in found.items()]
        signal_each(found, signal.SIGTERM)
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline and marked(token):
            time.sleep(0.05)
        signal_each(marked(token), signal.SIGKILL)
    return stopped


def remove_folders(listing: str) -> None:
    with contextlib.suppress(OSError):
        for line in Path(listing).read_text(encoding="utf-8").splitlines():
            shutil.rmtree(line, ignore_errors=True)
        os.remove(listing)


def main(token: str, listing: str) -> None:
    sys.stdin.read()  # returns when the run's process has closed the pipe or is gone
    stopped = stop(token)
    remove_folders(listing)
    with contextlib.suppress(OSError):  # a killed run reads no report: its pipe is broken
        for line in stopped:
            print(f"stopped a process the test run left: {line}", flush=True)


def remove_after_the_run(folder: str) -> None:
    """Have the reaper remove ``folder`` once the run is over (a no-op without a reaper)."""
    listing = os.environ.get(FOLDERS)
    if listing:
        with open(listing, "a", encoding="utf-8") as out:
            out.write(folder + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
