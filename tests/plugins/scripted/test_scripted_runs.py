"""The scripted model plays its script once per run: every run starts at the first step, and a
run that needs a step past the end fails, naming the script, instead of completing."""

from __future__ import annotations

from collections.abc import Callable

import trio
from _support.http_server import keyed_config, open_server

from soulacy.kernel import Kernel, RunResult, Tool
from soulacy.testing import Workspace, throwaway_plugin

ADD_THEN_ANSWER = [{"tool": "add", "arguments": {"a": 19, "b": 23}}, {"text": "It is 42."}]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def with_add(make_kernel: Callable[..., Kernel], **options: object) -> Kernel:
    """A kernel with the tool ``add``, on the in-memory store unless ``options`` say."""
    tool = throwaway_plugin("add", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(add)])
    options.setdefault("plugins", ["no:sqlite_store"])
    return make_kernel(extra_plugins=[tool], **options)


def adder(workspace: Workspace, make_kernel: Callable[..., Kernel]) -> Kernel:
    workspace.scripted_agent("adder", ADD_THEN_ANSWER, tools=["add"])
    return with_add(make_kernel)


async def test_every_run_of_one_kernel_plays_the_script_from_its_first_step(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = adder(workspace, make_kernel)
    try:
        first = await kernel.run("adder", "19 + 23?", session_id="one")
        second = await kernel.run("adder", "19 + 23?", session_id="two")
        same_conversation = await kernel.run("adder", "and again?", session_id="one")
    finally:
        await kernel.aclose()
    for result in (first, second, same_conversation):
        assert (result.status, result.reply) == ("completed", "It is 42."), result.metadata()
        assert (result.llm_calls, result.tool_calls) == (2, 1)


async def test_runs_at_the_same_time_each_have_their_own_place_in_the_script(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    kernel = adder(workspace, make_kernel)
    results: list[RunResult] = []

    async def one(session: str) -> None:
        results.append(await kernel.run("adder", "19 + 23?", session_id=session))

    try:
        async with trio.open_nursery() as nursery:
            for n in range(4):
                nursery.start_soon(one, f"s{n}")
    finally:
        await kernel.aclose()
    assert [(r.status, r.reply, r.tool_calls) for r in results] == [
        ("completed", "It is 42.", 1)
    ] * 4


async def test_a_run_that_needs_a_step_past_the_end_fails_naming_the_script(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.scripted_agent(
        "short", [{"tool": "add", "arguments": {"a": 1, "b": 2}}], tools=["add"]
    )
    kernel = with_add(make_kernel)
    try:
        result = await kernel.run("short", "1 + 2?")
    finally:
        await kernel.aclose()
    assert (result.status, result.incomplete_reason) == ("failed", "provider_error")
    assert result.error is not None
    assert "agents/short/script.yaml" in result.error
    assert "has ended" in result.error
    assert "repeat" in result.error  # how to make it go on
    assert result.reply != "(the script has ended)"


async def test_a_provider_entry_with_a_script_file_also_starts_each_run_at_its_first_step(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    (workspace.path / "scripts").mkdir()
    (workspace.path / "scripts" / "hello.yaml").write_text("steps:\n  - text: Hello.\n")
    workspace.write_config(
        "llm:\n  providers:\n    demo: {type: scripted, options: {script: scripts/hello.yaml}}\n"
    )
    workspace.write_agent("greeter", {"llm": {"provider": "demo"}})
    kernel = make_kernel(plugins=["no:sqlite_store"])
    try:
        results = [await kernel.run("greeter", "hi") for _ in range(3)]
    finally:
        await kernel.aclose()
    assert [(r.status, r.reply) for r in results] == [("completed", "Hello.")] * 3


async def test_a_served_demo_answers_every_chat(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config(keyed_config())
    workspace.scripted_agent("adder", ADD_THEN_ANSWER, tools=["add"])
    tool = throwaway_plugin("add", soulacy_tools=lambda kernel, agent_id: [Tool.from_function(add)])
    bodies = []
    async with open_server(make_kernel, extra_plugins=[tool]) as server, server.client() as client:
        for session in ("a", "b", "a"):
            response = await client.post(
                "/chat", json={"agent_id": "adder", "text": "19 + 23?", "session_id": session}
            )
            assert response.status_code == 200, response.text
            bodies.append(response.json())
    assert [(b["status"], b["reply"]) for b in bodies] == [("completed", "It is 42.")] * 3


async def test_a_script_that_starts_where_the_conversation_is_plays_a_dialogue(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    folder = workspace.path / "agents" / "guide"
    folder.mkdir(parents=True)
    (folder / "script.yaml").write_text(
        "start: conversation\n"
        "steps:\n  - {tool: add, arguments: {a: 1, b: 2}}\n  - text: Three.\n  - text: Bye.\n"
    )
    llm = {"provider": "scripted", "model": "agents/guide/script.yaml"}
    workspace.write_agent("guide", {"llm": llm, "tools": ["add"]})
    kernel = with_add(make_kernel)
    try:
        first = await kernel.run("guide", "1 + 2?", session_id="s")
        second = await kernel.run("guide", "thanks", session_id="s")
        other = await kernel.run("guide", "1 + 2?", session_id="t")  # a conversation of its own
        past = await kernel.run("guide", "anything else?", session_id="s")
    finally:
        await kernel.aclose()
    assert [(r.status, r.reply) for r in (first, second, other)] == [
        ("completed", "Three."),
        ("completed", "Bye."),
        ("completed", "Three."),
    ]
    assert (past.status, past.incomplete_reason) == ("failed", "provider_error")
