"""Scratch kernels: where a candidate agent runs its checks without touching the workspace.

``kernel.run`` runs agents from files, so a candidate is written into a scratch workspace: a
temporary folder that links the real workspace's files (the agent's folder, other agents, data
folders) except config.yaml, the agent's own SOUL.yaml and database files. A kernel on that
folder shares the caller's plugins and validated configuration but has its own agent cache,
providers and store, so check runs never reach the workspace's history, and a candidate with a
``schedule:`` is invisible to a scheduler serving the workspace.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import trio

from soulacy.kernel import Kernel

AGENTS_DIR = "agents"
AGENT_FILE = "SOUL.yaml"
CONFIG_FILE = "config.yaml"
# SQLite files and their journals: check runs get a store of their own.
_DATABASE = re.compile(r"\.(db|sqlite3?)(-wal|-shm|-journal)?$", re.IGNORECASE)


def scratch_kernel(kernel: Kernel, workspace: Path) -> Kernel:
    """A kernel on ``workspace`` with ``kernel``'s plugins and configuration, configured as
    ``Kernel.from_plugins`` does (the configuration was validated when ``kernel`` loaded)."""
    return kernel.sibling(workspace)


@contextmanager
def scratch_workspace(workspace: Path, agent_id: str) -> Iterator[Path]:
    """A temporary workspace linking ``workspace``'s files, with ``agents/<agent_id>/`` a real
    folder (its files linked, SOUL.yaml left for the candidate); removed on exit."""
    with tempfile.TemporaryDirectory(prefix="soulacy-studio-") as tmp:
        root = Path(tmp)
        for entry in _entries(workspace):
            if entry.name not in (CONFIG_FILE, AGENTS_DIR) and not _DATABASE.search(entry.name):
                _link(entry, root / entry.name)
        agents = root / AGENTS_DIR
        own = agents / agent_id
        own.mkdir(parents=True)
        for folder in _entries(workspace / AGENTS_DIR):
            if folder.name != agent_id:
                _link(folder, agents / folder.name)
        for entry in _entries(workspace / AGENTS_DIR / agent_id):
            # the person's file and atomic-write leftovers (.SOUL.yaml.*.tmp) stay out
            if not entry.name.lstrip(".").startswith(AGENT_FILE):
                _link(entry, own / entry.name)
        yield root


@asynccontextmanager
async def candidate_kernel(
    kernel: Kernel, root: Path, agent_id: str, text: str
) -> AsyncIterator[Kernel]:
    """A fresh scratch kernel on ``root`` whose ``agent_id`` is the candidate ``text``: fresh
    providers each time, so a scripted model starts its script again for every attempt."""
    (root / AGENTS_DIR / agent_id / AGENT_FILE).write_text(text, encoding="utf-8")
    scratch = scratch_kernel(kernel, root)
    try:
        yield scratch
    finally:
        with trio.CancelScope(shield=True):
            await scratch.aclose()


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _link(target: Path, link: Path) -> None:
    link.symlink_to(target.resolve(), target_is_directory=target.is_dir())
