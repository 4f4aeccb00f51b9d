"""What ``soulacy serve`` does when the workspace's files change under it.

An agent's SOUL.yaml that changes is validated and, when valid, reloaded: the agent's next run
uses it (the runs under way keep the version they started with). An invalid one is not
reloaded: the error is logged and the agent's runs keep the last valid version. What the
running services read once at start is said to need a restart: a changed ``schedule:`` (the
scheduler's), and config.yaml changed by anything but the server itself. An agent's tool files
(``file.py:function``) are imported again by the next run once they change (the ``file_tools``
plugin); they need nothing here. See docs/cli.md#what-a-running-serve-does-with-edits.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from soulacy.kernel import AGENT_FILE, AGENTS_DIR, UsageError
from soulacy.kernel.yamlio import load_yaml_file

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec, Kernel, Settings

log = logging.getLogger("soulacy.core")

INTERVAL = 1.0  # seconds between two looks at the files
Stamp = tuple[int, int]  # (mtime in ns, size)


def _stamp(path: Path) -> Stamp | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


class WorkspaceFiles:
    """The stamps of config.yaml and of every ``agents/ID/SOUL.yaml`` at the last look, and
    the agents as they were last loaded; :meth:`look` acts on what changed since."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.config: Settings = kernel.config
        self.stamps = self._stamps()
        self.agents: dict[str, AgentSpec | None] = {}
        for agent_id in kernel.agent_ids():
            self.agents[agent_id] = self._loaded(agent_id)

    def _loaded(self, agent_id: str) -> AgentSpec | None:
        try:
            return self.kernel.agent(agent_id)
        except UsageError:  # invalid: its runs say why
            return None

    def _agent_file(self, agent_id: str) -> Path:
        return self.kernel.workspace / AGENTS_DIR / agent_id / AGENT_FILE

    def _stamps(self) -> dict[Path, Stamp]:
        kernel = self.kernel
        files = [kernel.config_file, *(kernel.workspace / AGENTS_DIR).glob(f"*/{AGENT_FILE}")]
        return {path: stamp for path in files if (stamp := _stamp(path)) is not None}

    def look(self) -> None:
        """Act on every file changed, added or removed since the last look."""
        now = self._stamps()
        changed = [p for p in now.keys() | self.stamps.keys() if now.get(p) != self.stamps.get(p)]
        self.stamps = now
        for path in sorted(changed):
            if path == self.kernel.config_file:
                self._config_changed()
            else:
                self._agent_changed(path.parent.name, path in now)
        self.config = self.kernel.config

    def _config_changed(self) -> None:
        if self.kernel.config is not self.config:
            return  # the server wrote it itself (the portal's settings): in effect already
        log.warning(
            "%s changed on disk: the running server keeps the configuration it started with;"
            " restart `soulacy serve` for the change to take effect",
            self.kernel.config_file,
        )

    def _agent_changed(self, agent_id: str, exists: bool) -> None:
        kernel = self.kernel
        path = self._agent_file(agent_id)
        where = f"{AGENTS_DIR}/{agent_id}/{AGENT_FILE}"
        before = self.agents.get(agent_id)
        if not exists:
            kernel.forget_agent(agent_id)
            self.agents.pop(agent_id, None)
            log.info("%s removed: agent %r is gone", where, agent_id)
            return
        try:
            after = kernel.check_agent(agent_id, load_yaml_file(path), path)
        except UsageError as exc:
            keeps = "keep the version loaded before" if before else "fail until it is valid"
            log.error(
                "%s changed and is invalid, not reloaded (its runs %s): %s", where, keeps, exc
            )
            return
        kernel.forget_agent(agent_id)  # its next run reads the file again
        self.agents[agent_id] = after
        log.info(
            "%s %s: the next runs of %r use it", where, "reloaded" if before else "loaded", agent_id
        )
        if _schedule(before) != _schedule(after):
            log.warning(
                "%s: the agent's schedule changed; the scheduler keeps the schedules it started"
                " with: restart `soulacy serve` for the change to take effect",
                where,
            )


def _schedule(agent: AgentSpec | None) -> Any:
    """The agent's schedule as the scheduler reads it at start (None: it has none)."""
    if agent is None:
        return None
    try:
        schedule = agent.section("schedule")
        enabled = agent.section("enabled")
    except KeyError:  # no loaded plugin declares schedules
        return None
    return schedule if enabled else None


async def watch_workspace(kernel: Kernel, interval: float = INTERVAL) -> None:
    """Look at the workspace's files every ``interval`` seconds until cancelled (``serve``
    runs it in the kernel's nursery, which cancels it when the kernel stops)."""
    files = WorkspaceFiles(kernel)
    while True:
        await trio.sleep(interval)
        files.look()
