"""`soulacy serve` processes on one workspace for the multi-process tests: started on a free
port with an environment of their own, waited for until healthy, stopped however the test
ends (SIGCONT first: a stopped process ignores SIGTERM)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx

from soulacy.testing import Workspace


@attrs.define
class Node:
    name: str
    url: str
    process: subprocess.Popen[str]
    log: Path

    def client(self, key: str) -> httpx.AsyncClient:
        """A client of the node's API with the bearer ``key``."""
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.AsyncClient(base_url=self.url + "/api/v1", headers=headers, timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(workspace: Workspace, name: str, folder: Path, env: Mapping[str, str]) -> Node:
    """``soulacy serve`` on ``workspace``, with no SOULACY_* variable but ``env``'s; its
    standard error in ``folder/NAME.log``."""
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SOULACY_")}
    environ.update(env, SOULACY_SERVER__PORT=str(port))
    log = folder / f"{name}.log"
    command = [sys.executable, "-m", "soulacy.cli", "--workspace", str(workspace.path)]
    with log.open("w") as err:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            [*command, "serve"], env=environ, stdout=subprocess.DEVNULL, stderr=err, text=True
        )
    return Node(name, f"http://127.0.0.1:{port}", process, log)


def wait_healthy(node: Node, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if node.process.poll() is not None:
            raise AssertionError(f"{node.name} exited: {node.log.read_text()}")
        try:
            if httpx.get(node.url + "/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{node.name} did not start: {node.log.read_text()}")


@contextmanager
def serving(nodes: list[Node]) -> Iterator[list[Node]]:
    """The nodes, once healthy; stopped when done, however it ends."""
    try:
        for node in nodes:
            wait_healthy(node)
        yield nodes
    finally:
        for node in nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
                node.process.send_signal(signal.SIGTERM)
        for node in nodes:
            try:
                node.process.wait(30)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(30)
