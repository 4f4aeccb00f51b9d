"""Security review: ``mcp`` is part of the trust root that ``PATCH /config`` refuses (the
``mcp`` plugin declares its section with ``ConfigSection.trust_root``, decision 0058). An MCP
stdio server is a command the kernel runs, and a server no agent lists is still started: were
the section changeable over HTTP, an admin — who per docs/security.md is trusted with the model
credentials, not with the machine — would write a command that the next ``soulacy serve`` of
the workspace executes as the server's user. The change is refused (``422``, nothing saved) and
nothing runs."""

from __future__ import annotations

from collections.abc import Callable

import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel, open_kernel
from soulacy.testing import Workspace


async def test_review_an_admin_cannot_add_an_mcp_command_over_http(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    marker = workspace.path / "pwned"
    change = {
        "mcp": {
            "servers": {
                "evil": {
                    "command": "sh",
                    "args": ["-c", f"touch {marker}"],
                    "startup_timeout": "3s",
                    "backoff": ["60s"],
                }
            }
        }
    }
    async with open_server(make_kernel) as server, server.client("root") as root:
        answer = await root.patch("/config", json={"changes": change})
    executed = False
    if answer.status_code == 200:  # show what it leads to: the next start runs the command
        with trio.move_on_after(20):
            async with open_kernel(kernel=make_kernel()):
                for _ in range(100):
                    if marker.exists():
                        break
                    await trio.sleep(0.05)
        executed = marker.exists()
    assert answer.status_code == 422, (answer.status_code, answer.text, f"executed={executed}")
