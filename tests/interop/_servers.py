"""Starting the model servers of the interop suite as real processes, on free local ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

MASTER_KEY = "sk-soulacy-interop-7f3a9c2e41b84d6f"  # the proxy refuses to start without one


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def running(
    argv: Sequence[str],
    *,
    ready_url: str,
    log: Path,
    env: dict[str, str] | None = None,
    timeout: float = 180.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` until the block ends; ready once ``ready_url`` answers 200. Its output goes
    to ``log``, which a failure to start quotes."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # its children (uvicorn workers) end with it
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{argv[0]} exited with {process.returncode} before it was ready:\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{argv[0]} was not ready in {timeout:.0f} s:\n"
                    + log.read_text(errors="replace")[-3000:]
                )
            time.sleep(0.5)
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def litellm_argv(config: Path, port: int) -> list[str]:
    code = "import sys; from litellm import run_server; sys.exit(run_server())"
    return [sys.executable, "-c", code, "--config", str(config), "--port", str(port)]
