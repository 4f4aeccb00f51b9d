"""A workspace folder for a test: :class:`Workspace` writes config.yaml and agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
from ruamel.yaml import YAML

from soulacy.kernel import AGENT_FILE, AGENTS_DIR, CONFIG_FILE

__all__ = ["Workspace"]


@attrs.define
class Workspace:
    """A workspace folder for a test: config.yaml plus ``agents/<id>/SOUL.yaml``."""

    path: Path

    def write_config(self, content: str | Mapping[str, Any]) -> Path:
        return self._write(self.path / CONFIG_FILE, content)

    def write_agent(self, agent_id: str, content: str | Mapping[str, Any]) -> Path:
        return self._write(self.path / AGENTS_DIR / agent_id / AGENT_FILE, content)

    def scripted_agent(
        self,
        agent_id: str,
        steps: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[str] = (),
        repeat: bool = False,
        **keys: Any,
    ) -> Path:
        """An agent on the scripted model (the builtin ``scripted`` plugin) playing ``steps``:
        each a ``{"text": ...}`` or ``{"tool": name, "arguments": {...}, "id": ...}`` reply.
        ``keys`` are more SOUL.yaml keys (``max_turns=3``, ``budget={...}``)."""
        script = f"{AGENTS_DIR}/{agent_id}/script.yaml"
        self._write(self.path / script, {"steps": [dict(s) for s in steps], "repeat": repeat})
        soul = {"llm": {"provider": "scripted", "model": script}, "tools": list(tools), **keys}
        return self.write_agent(agent_id, soul)

    @staticmethod
    def _write(path: Path, content: str | Mapping[str, Any]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            with path.open("w", encoding="utf-8") as fh:
                YAML(typ="safe", pure=True).dump(dict(content), fh)
        return path
