"""A run that ends while a tool runs leaves every tool call of its reply answered.

Model APIs refuse a conversation in which an assistant's tool call has no tool result before the
next message (OpenAI: a 400 naming the ``tool_call_id``; Anthropic: a ``tool_use`` without its
``tool_result``). A run cancelled mid-tool used to store the call unanswered, and every later
request of that conversation was refused. The local doubles of both APIs refuse such a request
as the APIs do (tests/_support), so each run below checks what it sends.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs
import pytest
import trio
from _support import anthropic_server, openai_server

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ToolCall
from soulacy.kernel.store import RunRecord
from soulacy.testing import Workspace, throwaway_plugin

CUT = "cancelled: the run ended ({}) while this tool call was running; its effect is unknown"
NOT_RUN = "not run: the run ended ({}) before this tool call started"
INTERRUPTED = (
    "interrupted: the run ended before this tool call's result was stored; its effect is unknown"
)


class ToolBox:
    """``block`` says it started, then waits for ``release``; ``note`` returns at once."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {"block": 0, "note": 0}
        self.started = trio.Event()
        self.release = trio.Event()

    def plugin(self) -> Any:
        async def block() -> str:
            """Waits until released."""
            self.runs["block"] += 1
            self.started.set()
            await self.release.wait()
            return "released"

        def note(text: str) -> str:
            """Notes a text."""
            self.runs["note"] += 1
            return f"noted {text}"

        tools = [Tool.from_function(block), Tool.from_function(note)]
        return throwaway_plugin("toolbox", soulacy_tools=lambda kernel, agent_id: tools)


@attrs.define
class Fake:
    """A model API double on 127.0.0.1 and what the tests need to script and read it."""

    kind: str
    server: Any
    config: str

    def calls(self, *calls: tuple[str, str, dict[str, Any]]) -> Any:
        if self.kind == "openai":
            return openai_server.tool_calls(*((i, n, json.dumps(a)) for i, n, a in calls))
        return anthropic_server.tool_use(*calls)

    def text(self, content: str) -> Any:
        return (openai_server if self.kind == "openai" else anthropic_server).text(content)

    def results(self, request: dict[str, Any]) -> dict[str, str]:
        """The tool results a request sent, by call id, in order."""
        found: dict[str, str] = {}
        for message in request["messages"]:
            if self.kind == "openai":
                if message["role"] == "tool":  # Chat Completions has no is_error
                    found[message["tool_call_id"]] = message["content"]
                continue
            for block in message["content"] if isinstance(message["content"], list) else ():
                if block["type"] == "tool_result":
                    assert block.get("is_error", False) == block["content"].startswith(
                        ("cancelled:", "not run:", "interrupted:")
                    )
                    found[block["tool_use_id"]] = block["content"]
        return found


@pytest.fixture(params=["openai", "anthropic"])
async def fake(request: pytest.FixtureRequest, nursery: trio.Nursery) -> AsyncIterator[Fake]:
    if request.param == "openai":
        server: Any = openai_server.FakeOpenAI()
        url, shutdown = await openai_server.serve_asgi(nursery, server.app)
        config = (
            "llm:\n  providers:\n    model:\n      type: openai\n"
            f"      base_url: {url}/v1\n      api_key: sk-test\n      model: fake\n"
            "      max_retries: 0\n"
        )
    else:
        server = anthropic_server.FakeAnthropic()
        url, shutdown = await anthropic_server.serve_asgi(nursery, server.app)
        config = (
            "plugins:\n  enable: [soulacy.contrib.anthropic]\n"
            "llm:\n  providers:\n    model:\n      type: anthropic\n"
            f"      base_url: {url}\n      api_key: sk-ant-test\n      model: claude-fake\n"
            "      max_retries: 0\n"
        )
    yield Fake(request.param, server, config)
    shutdown.set()


@pytest.fixture
async def load(
    workspace: Workspace, make_kernel: Callable[..., Kernel], fake: Fake
) -> AsyncIterator[Callable[..., tuple[Kernel, ToolBox]]]:
    """``load(**options)``: a kernel whose agent ``a`` has tools ``block`` and ``note`` on the
    fake model API, and its toolbox."""
    kernels: list[Kernel] = []

    def load(**options: Any) -> tuple[Kernel, ToolBox]:
        workspace.write_config(fake.config)
        workspace.write_agent(
            "a",
            {
                "llm": {"provider": "model"},
                "tools": ["block", "note"],
                "system_prompt": "Be brief.",
            },
        )
        toolbox = ToolBox()
        kernel = make_kernel(extra_plugins=[toolbox.plugin()], **options)
        kernels.append(kernel)
        return kernel, toolbox

    yield load
    for kernel in kernels:
        await kernel.aclose()


STORES = pytest.mark.parametrize(
    "plugins", [["no:sqlite_store"], []], ids=["memory_store", "sqlite_store"]
)


async def stored_tool_results(kernel: Kernel, session: str = "S") -> list[Message]:
    history = await kernel.store().load_history("a", session)
    return [m for m in history if m.role == "tool"]


@STORES
async def test_a_run_cancelled_mid_tool_answers_its_calls_and_the_conversation_goes_on(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake, plugins: list[str]
) -> None:
    kernel, toolbox = load(plugins=plugins)
    # One reply, two calls: the first is running when the run is cancelled, the second never
    # started.
    fake.server.answers.append(fake.calls(("c1", "block", {}), ("c2", "note", {"text": "x"})))
    results: dict[str, Any] = {}

    async def ask() -> None:
        results["r1"] = await kernel.run("a", "go", session_id="S", run_id="r1")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await toolbox.started.wait()
        assert kernel.cancel_run("r1")
    assert (results["r1"].status, results["r1"].incomplete_reason) == ("cancelled", "cancelled")
    assert toolbox.runs == {"block": 1, "note": 0}

    answered = await stored_tool_results(kernel)
    assert [(m.tool_call_id, m.name, m.content, m.is_error) for m in answered] == [
        ("c1", "block", CUT.format("cancelled"), True),
        ("c2", "note", NOT_RUN.format("cancelled"), True),
    ]

    # The next request of the conversation is one the API takes.
    fake.server.answers.append(fake.text("Cancelled, as you asked."))
    again = await kernel.run("a", "and now?", session_id="S", run_id="r2")
    assert fake.server.refused == []
    assert (again.status, again.error) == ("completed", None)
    assert again.reply == "Cancelled, as you asked."
    assert fake.results(fake.server.requests[-1]) == {
        "c1": CUT.format("cancelled"),
        "c2": NOT_RUN.format("cancelled"),
    }
    # Answered once: the next run's load found nothing to answer.
    assert len(await stored_tool_results(kernel)) == 2


async def test_a_run_cancelled_from_the_store_says_its_reason(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake
) -> None:
    kernel, toolbox = load()
    fake.server.answers.append(fake.calls(("c1", "block", {})))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("a", "go", session_id="S", run_id="r1"))
        await toolbox.started.wait()
        assert await kernel.request_cancel("r1", "not needed any more")
    [answer] = await stored_tool_results(kernel)
    assert answer.content == CUT.format("not needed any more")
    fake.server.answers.append(fake.text("ok"))
    assert (await kernel.run("a", "next", session_id="S")).status == "completed"
    assert fake.server.refused == []


@pytest.mark.parametrize("fake", ["openai"], indirect=True)
async def test_a_run_timed_out_mid_tool_answers_the_cut_call(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake
) -> None:
    kernel, _ = load()
    fake.server.answers.append(fake.calls(("c1", "block", {})))
    result = await kernel.run("a", "go", session_id="S", overrides={"run_timeout": "1s"})
    assert (result.status, result.incomplete_reason) == ("incomplete", "run_timeout")
    [answer] = await stored_tool_results(kernel)
    assert (answer.content, answer.is_error) == (CUT.format("run_timeout"), True)
    fake.server.answers.append(fake.text("ok"))
    assert (await kernel.run("a", "next", session_id="S")).status == "completed"
    assert fake.server.refused == []


@pytest.mark.parametrize("fake", ["openai"], indirect=True)
async def test_a_callers_cancellation_mid_tool_answers_the_cut_call(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake
) -> None:
    kernel, toolbox = load()
    fake.server.answers.append(fake.calls(("c1", "block", {})))
    scope = trio.CancelScope()

    async def ask() -> None:
        with scope:
            await kernel.run("a", "go", session_id="S", run_id="r1")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await toolbox.started.wait()
        scope.cancel()
    record = await kernel.store().get_run("r1")
    assert record is not None
    assert (record.status, record.incomplete_reason) == ("cancelled", "cancelled by caller")
    [answer] = await stored_tool_results(kernel)
    assert answer.content == CUT.format("cancelled by caller")
    fake.server.answers.append(fake.text("ok"))
    assert (await kernel.run("a", "next", session_id="S")).status == "completed"
    assert fake.server.refused == []


@pytest.mark.parametrize("fake", ["openai"], indirect=True)
@STORES
async def test_a_retry_of_the_cancelled_run_runs_the_cut_call_again_never_replays_it(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake, plugins: list[str]
) -> None:
    kernel, toolbox = load(plugins=plugins)
    fake.server.answers.append(fake.calls(("c1", "block", {}), ("c2", "note", {"text": "x"})))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: kernel.run("a", "go", session_id="S", run_id="r1"))
        await toolbox.started.wait()
        kernel.cancel_run("r1")
    # The cut call got an answer in the history, but no tool record: it has no result to
    # replay, nor a receipt in the proof.
    assert await kernel.store().load_tool_records("r1") == {}
    proof = await kernel.store().get_proof("r1")
    assert proof is not None
    assert (proof.receipts, proof.data()["status"]) == (0, "cancelled")

    # A retry of the run id whose model asks for the same calls runs them (as after a crash).
    toolbox.release.set()
    fake.server.answers += [
        fake.calls(("c1", "block", {}), ("c2", "note", {"text": "x"})),
        fake.text("done"),
    ]
    retry = await kernel.run("a", "go", session_id="S", run_id="r1")
    assert fake.server.refused == []
    assert (retry.status, retry.attempt, retry.tool_calls) == ("completed", 2, 2)
    assert toolbox.runs == {"block": 2, "note": 1}
    answered = await stored_tool_results(kernel)
    assert [(m.tool_call_id, m.content) for m in answered] == [
        ("c1", CUT.format("cancelled")),
        ("c2", NOT_RUN.format("cancelled")),
        ("c1", "released"),
        ("c2", "noted x"),
    ]
    assert set(await kernel.store().load_tool_records("r1")) == {"c1", "c2"}


async def store_unanswered(kernel: Kernel, messages: list[Message], run_id: str = "old") -> None:
    """Store ``messages`` as one run of conversation (a, S): what an earlier version left, or a
    process killed (SIGKILL) after it stored a call (one waiting for approval)."""
    store = kernel.store()
    record = await store.start_run(RunRecord(run_id, "a", "S", None, None, started_at=1.0))
    await store.record_turn(record, messages, [])
    await store.finish_run(run_id, {"status": "cancelled", "incomplete_reason": "cancelled"})


@STORES
async def test_a_stored_history_ending_with_unanswered_calls_is_answered_once(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake, plugins: list[str]
) -> None:
    kernel, _ = load(plugins=plugins)
    calls = (ToolCall("c1", "block", {}), ToolCall("c2", "note", {"text": "x"}))
    done = Message("tool", "noted x", tool_call_id="c2", name="note")
    await store_unanswered(kernel, [Message("user", "go"), Message("assistant", "", calls), done])

    fake.server.answers.append(fake.text("first"))
    first = await kernel.run("a", "next", session_id="S")
    assert fake.server.refused == []
    assert (first.status, first.reply) == ("completed", "first")
    assert list(fake.results(fake.server.requests[-1]).items()) == [
        ("c2", "noted x"),
        ("c1", INTERRUPTED),
    ]
    # The answer is stored with that run's first turn, right after the call's other results.
    history = await kernel.store().load_history("a", "S")
    assert [(m.role, m.tool_call_id, m.content) for m in history] == [
        ("user", None, "go"),
        ("assistant", None, ""),
        ("tool", "c2", "noted x"),
        ("tool", "c1", INTERRUPTED),
        ("user", None, "next"),
        ("assistant", None, "first"),
    ]
    assert history[3].is_error

    fake.server.answers.append(fake.text("second"))
    assert (await kernel.run("a", "again", session_id="S")).status == "completed"
    assert fake.server.refused == []
    assert len(await stored_tool_results(kernel)) == 2  # answered once, not at every load


@pytest.mark.parametrize("fake", ["openai"], indirect=True)
async def test_an_unanswered_call_inside_the_stored_history_is_answered_in_what_is_sent(
    load: Callable[..., tuple[Kernel, ToolBox]], fake: Fake
) -> None:
    kernel, _ = load()
    # A call left unanswered, then a run that went on in the conversation (and was refused).
    calls = (ToolCall("c1", "block", {}),)
    await store_unanswered(
        kernel, [Message("user", "go"), Message("assistant", "", calls), Message("user", "why?")]
    )
    fake.server.answers.append(fake.text("ok"))
    result = await kernel.run("a", "next", session_id="S")
    assert fake.server.refused == []
    assert result.status == "completed"
    sent = fake.server.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user", "user"]
    assert sent[3]["content"] == INTERRUPTED
    # The store appends: an answer can only be stored at the end, so this one is sent, not
    # stored (an answer after "why?" would be out of place).
    history = await kernel.store().load_history("a", "S")
    assert [m.role for m in history] == ["user", "assistant", "user", "user", "assistant"]


def test_the_answers_of_unanswered_calls_go_after_the_calls_other_results() -> None:
    from soulacy.plugins.engine._endings import answers_to_unanswered_calls

    first = (ToolCall("a1", "t"), ToolCall("a2", "t"), ToolCall("a3", "t"))
    second = (ToolCall("b1", "u"),)
    messages = [
        Message("user", "go"),
        Message("assistant", "", first),
        Message("tool", "done", tool_call_id="a2", name="t"),
        Message("user", "next"),
        Message("assistant", "", second),
    ]

    def say(call: ToolCall) -> str:
        return f"no result for {call.id}"

    found = answers_to_unanswered_calls(messages, say)
    assert found == [
        (3, Message("tool", "no result for a1", tool_call_id="a1", name="t", is_error=True)),
        (3, Message("tool", "no result for a3", tool_call_id="a3", name="t", is_error=True)),
        (5, Message("tool", "no result for b1", tool_call_id="b1", name="u", is_error=True)),
    ]
    assert answers_to_unanswered_calls(messages, say, start=3) == found[2:]
    answered = [*messages, Message("tool", "x", tool_call_id="b1")]
    assert [index for index, _ in answers_to_unanswered_calls(answered, say)] == [3, 3]
    assert answers_to_unanswered_calls([Message("user", "hi"), Message("assistant", "")], say) == []


def test_the_doubles_refuse_what_the_apis_refuse() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "next"}
    check = openai_server.unpaired_tool_calls
    assert check([user, asked, result, user]) is None
    assert "did not have response messages: c1" in str(check([user, asked, user]))
    assert "must be a response to a preceeding message" in str(check([user, result]))
    assert "must be a response" in str(check([user, asked, result, result]))

    use = {"type": "tool_use", "id": "t1", "name": "t", "input": {}}
    answer = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    said = {"role": "user", "content": [{"type": "text", "text": "next"}]}
    uses = {"role": "assistant", "content": [use]}
    check = anthropic_server.unpaired_tool_uses
    assert check([said, uses, {"role": "user", "content": [answer]}]) is None
    assert "ids were found without `tool_result` blocks" in str(check([said, uses, said]))
    assert "unexpected `tool_use_id`" in str(check([said, {"role": "user", "content": [answer]}]))
