"""MCP servers as a kernel service: started with the kernel, restarted with backoff when they
die, stopped on shutdown; streamable HTTP servers with headers. Real server processes."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from conftest import HttpServer, config, stdio_server, tool_results

from soulacy.kernel import Event, Kernel, open_kernel
from soulacy.plugins.mcp import McpService, McpStartError, service_of
from soulacy.testing import Workspace

# Generous: these machines are slow and shared; nothing below waits this long when it works.
PATIENCE = 120.0


def service(kernel: Kernel) -> McpService:
    found = service_of(kernel)
    assert found is not None
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(PATIENCE):
        while True:
            if condition():
                return
            await trio.sleep(0.05)
    raise AssertionError(f"waited {PATIENCE}s for {what}")


async def call(kernel: Kernel, agent_id: str, name: str, **arguments: object) -> object:
    (tool,) = [t for t in kernel.runner().tools_for(kernel.agent(agent_id)) if t.name == name]
    return await tool.function(**arguments)


async def test_a_server_is_stopped_when_the_kernel_shuts_down(
    workspace: Workspace, load: Callable[..., Kernel], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    workspace.scripted_agent("a", [{"text": "-"}], tools=["docs__pid"], mcp_servers=["docs"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        pid = int(str(await call(kernel, "a", "docs__pid")))
        assert alive(pid)
    assert service(kernel).statistics()["docs"].state == "stopped"
    await wait_until(lambda: not alive(pid), f"server process {pid} to end")


async def test_a_server_that_exits_while_idle_is_restarted(
    workspace: Workspace,
    load: Callable[..., Kernel],
    notes: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="soulacy.mcp")
    workspace.write_config(config({"docs": stdio_server(notes)}))
    workspace.scripted_agent("a", [{"text": "-"}], tools=["docs__pid"], mcp_servers=["docs"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        first = int(str(await call(kernel, "a", "docs__pid")))
        os.kill(first, signal.SIGKILL)
        stats = service(kernel).statistics
        await wait_until(lambda: stats()["docs"].starts == 2, "the server to be restarted")
        second = int(str(await call(kernel, "a", "docs__pid")))
        assert second != first
        assert (stats()["docs"].state, stats()["docs"].restarts) == ("ready", 1)
    (stopped,) = [r.getMessage() for r in caplog.records if "stopped:" in r.getMessage()]
    assert stopped.startswith("mcp server 'docs' stopped: the server closed the connection")


async def test_a_needed_server_that_fails_to_start_fails_the_kernel_start_naming_it(
    workspace: Workspace, load: Callable[..., Kernel], notes: Path
) -> None:
    workspace.write_config(
        config(
            {
                "docs": stdio_server(notes),
                "broken": {"command": str(workspace.path / "no-such-server")},
            }
        )
    )
    workspace.scripted_agent("a", [{"text": "-"}], mcp_servers=["docs", "broken"])
    kernel = load()
    with pytest.RaisesGroup(
        pytest.RaisesExc(
            McpStartError,
            match=r"^MCP servers that agents list in mcp_servers did not start: 'broken':"
            r" FileNotFoundError: .*no-such-server",
        ),
        flatten_subgroups=True,  # open_kernel's nursery, and nursery.start's own
    ):
        async with open_kernel(kernel=kernel):
            raise AssertionError("the kernel started")  # pragma: no cover
    assert service(kernel).statistics()["docs"].state == "stopped"  # the others were stopped


async def test_a_server_no_agent_lists_that_fails_to_start_is_a_warning(
    workspace: Workspace,
    load: Callable[..., Kernel],
    notes: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="soulacy.mcp")
    workspace.write_config(
        config(
            {
                "docs": stdio_server(notes),
                "spare": {"command": str(workspace.path / "no-such-server"), "backoff": ["1h"]},
            }
        )
    )
    workspace.scripted_agent("a", [{"text": "-"}], tools=["docs__add"], mcp_servers=["docs"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        stats = kernel.started["mcp"]
        assert (stats["docs"].state, stats["spare"].state) == ("ready", "failed")
        assert await call(kernel, "a", "docs__add", a=1, b=2) == "3"
    (warning,) = [r for r in caplog.records if r.name == "soulacy.mcp" and "spare" in r.message]
    assert warning.levelno == logging.WARNING
    assert warning.getMessage().startswith("mcp server 'spare' did not start: FileNotFoundError")


async def test_an_http_server_gets_the_configured_headers_and_its_tools_run(
    workspace: Workspace,
    load: Callable[..., Kernel],
    http_server: Callable[..., HttpServer],
) -> None:
    server = http_server(token="sekrit-token")
    workspace.write_config(
        config({"remote": {"url": server.url, "headers": {"X-Token": "sekrit-token"}}})
    )
    workspace.scripted_agent(
        "a",
        [{"tool": "remote__note", "arguments": {"text": "over http"}}, {"text": "noted"}],
        tools=["remote__note"],
        mcp_servers=["remote"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        assert kernel.started["mcp"]["remote"].transport == "http"
        events = kernel.events.subscribe(buffer=float("inf"))
        result = await kernel.run("a", "note it")
        proof = await kernel.store().get_proof(result.run_id)
    assert result.status == "completed"
    seen: list[Event] = []
    while True:
        try:
            seen.append(events.receive_nowait())
        except trio.WouldBlock:
            break
    (note,) = tool_results(seen)
    assert (note["is_error"], note["preview"]) == (False, "noted 'over http' (1 so far)")
    assert proof is not None
    assert [r["tool"] for r in proof.data()["receipts"]] == ["remote__note"]


async def test_an_http_server_refusing_the_headers_is_a_start_error_without_their_values(
    workspace: Workspace,
    load: Callable[..., Kernel],
    http_server: Callable[..., HttpServer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = http_server(token="right-token")
    workspace.write_config(
        config(
            {
                "remote": {
                    "url": server.url,
                    "headers": {"X-Token": "wrong-token-value"},
                    "startup_timeout": "60s",
                }
            }
        )
    )
    workspace.scripted_agent("a", [{"text": "-"}], mcp_servers=["remote"])
    kernel = load()
    with pytest.RaisesGroup(
        pytest.RaisesExc(McpStartError, match=r"did not start: 'remote': .*401"),
        flatten_subgroups=True,
    ) as caught:
        async with open_kernel(kernel=kernel):
            raise AssertionError("the kernel started")  # pragma: no cover
    assert "wrong-token-value" not in repr(caught.value.exceptions)
    assert "wrong-token-value" not in caplog.text


async def test_an_http_server_that_goes_away_is_reconnected_when_it_is_back(
    workspace: Workspace,
    load: Callable[..., Kernel],
    http_server: Callable[..., HttpServer],
) -> None:
    first = http_server()
    workspace.write_config(
        config({"remote": {"url": first.url, "ping_interval": "500ms", "backoff": ["200ms"]}})
    )
    workspace.scripted_agent("a", [{"text": "-"}], tools=["remote__add"], mcp_servers=["remote"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        assert await call(kernel, "a", "remote__add", a=1, b=2) == "3"
        stats = service(kernel).statistics
        first.stop()
        await wait_until(lambda: stats()["remote"].state == "restarting", "a missed ping")
        http_server(port=first.port)  # back, on the same address
        await wait_until(lambda: stats()["remote"].starts == 2, "the server to be reconnected")
        assert await call(kernel, "a", "remote__add", a=2, b=2) == "4"
        assert stats()["remote"].restarts >= 1
