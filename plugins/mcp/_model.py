"""The ``mcp:`` section of config.yaml and the tool names an MCP server's tools get."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

import attrs

from soulacy.kernel import Duration

# What providers accept as a tool name (OpenAI and Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``). A
# server's tool ``read`` is offered as ``<server>__read``, the original system's spelling.
SEPARATOR = "__"
MAX_TOOL_NAME = 64
SERVER_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*$")
MAX_SERVER_ID = 32
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")


@attrs.frozen
class McpServer:
    """One MCP server: a command to start (stdio) or a URL to reach (streamable HTTP).

    ``transport`` may be left out: ``command`` means stdio, ``url`` means HTTP. ``env`` is added
    to the environment the SDK gives a stdio server; ``headers`` go with every HTTP request and
    are secrets (redacted wherever the configuration is shown). A server that exits, or stops
    answering the ping sent every ``ping_interval`` (0: never), is restarted after the next
    ``backoff`` delay (the last one repeats; the streak resets once it stays up a minute).
    """

    transport: Literal["stdio", "http"] | None = None
    command: str | None = None
    args: list[str] = attrs.Factory(list)
    env: dict[str, str] = attrs.Factory(dict)
    cwd: str | None = None  # relative to the workspace
    url: str | None = None
    headers: dict[str, str] = attrs.Factory(dict)
    enabled: bool = True
    startup_timeout: Duration = Duration(30)
    ping_interval: Duration = Duration(30)
    backoff: list[Duration] = attrs.Factory(
        lambda: [Duration(1), Duration(2), Duration(5), Duration(10), Duration(30)]
    )

    @property
    def kind(self) -> Literal["stdio", "http"]:
        if self.transport is not None:
            return self.transport
        return "http" if self.url is not None else "stdio"


@attrs.frozen
class McpConfig:
    servers: dict[str, McpServer] = attrs.Factory(dict)


def tool_name(server_id: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server_id``: ``<server>__<tool>``, with the
    characters providers refuse replaced by ``_`` and, past 64 characters, a short hash."""
    name = f"{server_id}{SEPARATOR}{_NOT_ALLOWED.sub('_', tool)}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def server_of(name: str) -> str | None:
    """The server part of a namespaced tool name, or None when it has none."""
    server, sep, rest = name.partition(SEPARATOR)
    return server if sep and server and rest else None
