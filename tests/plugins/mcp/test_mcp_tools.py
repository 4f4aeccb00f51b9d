"""MCP servers' tools in agent runs, against real server processes written with the SDK: they
behave like every other tool (call ids, replay, progress detection, the run's tool timeout,
permissions, proof receipts)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import trio
from conftest import config, executed, stdio_server, tool_results

from soulacy.kernel import Event, Kernel, open_kernel
from soulacy.plugins.mcp import service_of
from soulacy.testing import Workspace, participant_plugin


def record(kernel: Kernel) -> trio.MemoryReceiveChannel[Event]:
    return kernel.events.subscribe(buffer=float("inf"))


def drain(channel: trio.MemoryReceiveChannel[Event]) -> list[Event]:
    events = []
    while True:
        try:
            events.append(channel.receive_nowait())
        except trio.WouldBlock:
            return events


async def test_an_agent_calls_a_stdio_servers_tool_and_the_proof_has_its_receipt(
    workspace: Workspace,
    load: Callable[..., Kernel],
    agent: Callable[..., Path],
    notes: Path,
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [{"tool": "docs__add", "arguments": {"a": 2, "b": 3}, "id": "c1"}, {"text": "It is 5."}],
        ["docs__add"],
        ["docs"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        stats = kernel.started["mcp"]["docs"]
        assert (stats.state, stats.transport, stats.starts) == ("ready", "stdio", 1)
        events = record(kernel)
        result = await kernel.run("a", "what is 2 + 3?")
        proof = await kernel.store().get_proof(result.run_id)
    assert (result.status, result.reply) == ("completed", "It is 5.")
    (tool_result,) = tool_results(drain(events))
    assert (tool_result["name"], tool_result["is_error"], tool_result["preview"]) == (
        "docs__add",
        False,
        "5",
    )
    assert proof is not None
    (receipt,) = proof.data()["receipts"]
    assert (receipt["call_id"], receipt["tool"], receipt["result"], receipt["is_error"]) == (
        "c1",
        "docs__add",
        "5",
        False,
    )
    assert json.loads(receipt["arguments"]) == {"a": 2, "b": 3}


async def test_tools_are_named_server__tool_with_the_servers_schema_and_mcp_tools_narrows_them(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent("all", [{"text": "-"}], ["docs__add", "docs__look_up"], ["docs"])
    agent("some", [{"text": "-"}], ["docs__add"], ["docs"], mcp_tools=["docs__add"])
    agent("servers-only", [{"text": "-"}], [], ["docs"], mcp_tools=["docs__look_up"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        offered = {t.name: t for t in kernel.runner().tools_for(kernel.agent("all"))}
        # the server's "look.up": a dot is not a name providers accept. The tools: entries
        # come first; mcp_servers chooses the server's other tools too (mcp_tools narrows).
        assert list(offered)[:2] == ["docs__add", "docs__look_up"]
        assert len(offered) > 2
        assert all(name.startswith("docs__") for name in offered)
        # An agent of the original format lists servers only: their tools, no tools: entry.
        only = [t.name for t in kernel.runner().tools_for(kernel.agent("servers-only"))]
        assert only == ["docs__look_up"]
        add = offered["docs__add"]
        assert add.description == "Add two numbers."
        assert add.parameters["required"] == ["a", "b"]
        assert add.parameters["properties"]["a"]["type"] == "integer"
        assert await offered["docs__look_up"].function(word="mcp") == "mcp: found"
        contributed = [
            t.name
            for tools in kernel.hook.soulacy_tools(
                kernel=kernel, agent_id="some", agent=kernel.agent("some")
            )
            for t in tools
        ]
    assert [n for n in contributed if n.startswith("docs__")] == ["docs__add"]


async def test_an_is_error_result_is_an_error_tool_result_the_model_sees(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [{"tool": "docs__fail", "arguments": {"reason": "disk full"}}, {"text": "gave up"}],
        ["docs__fail"],
        ["docs"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        events = record(kernel)
        result = await kernel.run("a", "try")
        history = await kernel.store().load_history("a", result.session_id)
    assert result.status == "completed"
    (tool_result,) = tool_results(drain(events))
    assert tool_result["is_error"] is True
    assert tool_result["preview"] == "error: McpToolError: Error executing tool fail: disk full"
    (tool_message,) = [m for m in history if m.role == "tool"]
    assert (tool_message.content, tool_message.is_error) == (
        "error: McpToolError: Error executing tool fail: disk full",
        True,
    )


async def test_a_replayed_call_id_reuses_its_result_and_the_server_runs_it_once(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    note = {"tool": "docs__note", "arguments": {"text": "x"}, "id": "c1"}
    agent("a", [note, note, {"text": "done"}], ["docs__note"], ["docs"])
    kernel = load()
    async with open_kernel(kernel=kernel):
        events = record(kernel)
        result = await kernel.run("a", "note x")
    assert result.status == "completed"
    assert executed(notes) == ["x"]
    results = tool_results(drain(events))
    assert [(r["replayed"], r["preview"]) for r in results] == [
        (False, "noted 'x' (1 so far)"),
        (True, "noted 'x' (1 so far)"),
    ]


async def test_a_retried_run_replays_the_stored_call_instead_of_calling_the_server_again(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    """A retry of a run id in another kernel (a new process after a crash) replays the calls
    stored in the SQLite store: the server does not execute them again."""
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [{"tool": "docs__note", "arguments": {"text": "once"}, "id": "n1"}, {"text": "ok"}],
        ["docs__note"],
        ["docs"],
    )
    sqlite = {"plugins": ["no:http", "no:scheduler"]}
    first = load(**sqlite)
    async with open_kernel(kernel=first):
        done = await first.run("a", "note", run_id="r1", session_id="s")
    assert (done.status, executed(notes)) == ("completed", ["once"])
    retry = load(**sqlite)
    async with open_kernel(kernel=retry):
        assert list(await retry.store().load_tool_records("r1")) == ["n1"]
        events = record(retry)
        again = await retry.run("a", "note", run_id="r1", session_id="s")
    assert again.status == "completed"
    assert [(r["replayed"], r["preview"]) for r in tool_results(drain(events))] == [
        (True, "noted 'once' (1 so far)")
    ]
    assert executed(notes) == ["once"]


async def test_a_denied_call_and_bad_arguments_never_reach_the_server(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    """The kernel's permission hook and its schema check come before the server."""
    workspace.write_config(config({"docs": stdio_server(notes)}))
    for agent_id, arguments in (("denied", {"text": "secret"}), ("bad", {"text": 5})):
        agent(
            agent_id,
            [{"tool": "docs__note", "arguments": arguments}, {"text": "ok"}],
            ["docs__note"],
            ["docs"],
        )
    deny = participant_plugin(
        "deny",
        before_tool_call=lambda run, call: (
            f"permission denied for tool {call.name!r}" if run.agent_id == "denied" else None
        ),
    )
    kernel = load(deny)
    async with open_kernel(kernel=kernel):
        events = record(kernel)
        await kernel.run("denied", "go")
        await kernel.run("bad", "go")
    denied, bad = tool_results(drain(events))
    assert denied["preview"] == "error: permission denied for tool 'docs__note'"
    assert bad["preview"] == "error: invalid arguments: arguments.text: expected string, got int"
    assert executed(notes) == []


async def test_identical_mcp_results_are_detected_as_no_progress(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [{"tool": "docs__same"}],
        ["docs__same"],
        ["docs"],
        repeat=True,
        max_turns=-1,
        no_progress_limit=3,
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        result = await kernel.run("a", "go")
    assert (result.status, result.incomplete_reason) == ("incomplete", "no_progress")
    assert result.tool_calls == 3


async def test_a_slow_server_hits_the_runs_tool_timeout_and_the_next_call_works(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(
        config({"docs": stdio_server(notes)}, runtime={"timeouts": {"tool": "2s"}})
    )
    agent(
        "a",
        [
            {"tool": "docs__slow", "arguments": {"seconds": 600}},
            {"tool": "docs__add", "arguments": {"a": 1, "b": 1}},
            {"text": "moved on"},
        ],
        ["docs__slow", "docs__add"],
        ["docs"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        events = record(kernel)
        result = await kernel.run("a", "go")
        stats = service_of(kernel).statistics()["docs"]  # type: ignore[union-attr]
    assert result.status == "completed"
    previews = [r["preview"] for r in tool_results(drain(events))]
    assert previews == ["error: tool 'docs__slow' timed out after 2.0s", "2"]
    assert (stats.starts, stats.restarts) == (1, 0)  # a timeout is not a crash


async def test_a_server_that_crashes_mid_call_gives_an_error_result_and_is_restarted(
    workspace: Workspace, load: Callable[..., Kernel], agent: Callable[..., Path], notes: Path
) -> None:
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [
            {"tool": "docs__crash", "id": "c1"},
            {"tool": "docs__note", "arguments": {"text": "after"}, "id": "c2"},
            {"text": "recovered"},
        ],
        ["docs__crash", "docs__note"],
        ["docs"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        events = record(kernel)
        result = await kernel.run("a", "go")
        stats = service_of(kernel).statistics()["docs"]  # type: ignore[union-attr]
    assert result.status == "completed"
    crashed, after = tool_results(drain(events))
    assert crashed["is_error"] is True
    assert crashed["preview"].startswith(
        "error: McpServerLost: mcp server 'docs' stopped during the call to 'crash'"
    )
    assert "not retried" in crashed["preview"]
    assert (after["is_error"], after["preview"]) == (False, "noted 'after' (1 so far)")
    assert (stats.state, stats.starts, stats.restarts) == ("ready", 2, 1)


async def test_a_servers_hints_are_its_tools_effects_and_calls_carry_their_idempotency_key(
    workspace: Workspace,
    load: Callable[..., Kernel],
    agent: Callable[..., Path],
    notes: Path,
) -> None:
    # The effect ledger reads MCP's hints: read-only is `read`, idempotent is `idempotent`,
    # neither is `unsafe`; an idempotent server gets the call's key in the request's _meta.
    workspace.write_config(config({"docs": stdio_server(notes)}))
    agent(
        "a",
        [{"tool": "docs__keyed", "arguments": {"text": "hi"}, "id": "k1"}, {"text": "kept"}],
        ["docs__add", "docs__keyed", "docs__note"],
        ["docs"],
    )
    kernel = load()
    async with open_kernel(kernel=kernel):
        effects = {t.name: t.effects for t in kernel.runner().tools_for(kernel.agent("a"))}
        result = await kernel.run("a", "keep it", run_id="R-key")
    shown = {name: effects[name] for name in ("docs__add", "docs__keyed", "docs__note")}
    assert shown == {"docs__add": "read", "docs__keyed": "idempotent", "docs__note": "unsafe"}
    assert result.status == "completed"
    assert executed(notes) == ["hi soulacy:R-key:k1"]
