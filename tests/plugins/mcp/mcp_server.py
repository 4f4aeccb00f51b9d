"""A real MCP server written with the official SDK, for the MCP plugin's tests.

``python mcp_server.py`` serves over stdio; ``python mcp_server.py http [TOKEN [PORT]]`` serves
streamable HTTP on 127.0.0.1 (on PORT, or a free port; printed as the first line of stdout),
refusing with 401 every request whose ``X-Token`` header is not TOKEN (``-``: any).

Every executed call of ``note`` appends a line to the file named by $NOTES, so that a test can
count executions across calls, runs and restarts of the process.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("soulacy-test")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
def note(text: str) -> str:
    """Write down a note and say how many there are."""
    notes = Path(os.environ["NOTES"])
    with notes.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    count = len(notes.read_text(encoding="utf-8").splitlines())
    return f"noted {text!r} ({count} so far)"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
def keyed(text: str, ctx: Context) -> str:
    """Notes the call's idempotency key (the _meta a Soulacy run sends) with the text."""
    meta = ctx.request_context.meta or {}
    with Path(os.environ["NOTES"]).open("a", encoding="utf-8") as fh:
        fh.write(f"{text} {meta.get('soulacy/idempotency-key')}\n")
    return "kept"


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """The process exits in the middle of the call."""
    os._exit(3)


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await anyio.sleep(seconds)
    return "slept"


@server.tool()
def same() -> str:
    """Always the same answer."""
    return "nothing new"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(name="look.up")
def look_up(word: str) -> str:
    """A tool whose name has a character providers refuse."""
    return f"{word}: found"


def serve_http(token: str | None, port: int) -> None:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    app = server.streamable_http_app()

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and token is not None:
                headers = dict(scope["headers"])
                if headers.get(b"x-token") != token.encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"bad token"})
                    return
            await inner(scope, receive, send)

        return asgi

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the same port again, at once
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(guarded(app), log_level="warning", lifespan="on")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        token = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
        serve_http(token, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    else:
        server.run()
