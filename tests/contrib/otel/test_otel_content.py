"""What the plugin makes of the compactor's ``context.compacted`` events, and the text of
streamed replies on ``chat`` spans when contents are recorded."""

from __future__ import annotations

import json
from collections.abc import Callable

from conftest import Traced

from soulacy.testing import Workspace

SMALL = """\
llm:
  providers:
    small:
      type: scripted
      context_window: 1200
      max_output_tokens: 200
"""


def small_agent(workspace: Workspace, calls: int) -> None:
    steps = [{"tool": "long", "arguments": {"part": n}} for n in range(calls)]
    script = "agents/reader/script.yaml"
    workspace.scripted_agent(
        "reader",
        [*steps, {"text": "read them all"}],
        tools=["long"],
        llm={"provider": "small", "model": script},
    )


async def test_compactions_are_counted_and_are_events_of_the_run_span(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(SMALL)
    small_agent(workspace, 4)
    result = await t.kernel.run("reader", "read four parts")
    assert result.status == "completed", result.error
    run = t.one("invoke_agent reader")
    events = [e for e in run.events if e.name == "context.compacted"]
    assert events, [e.name for e in run.events]
    assert t.metric("soulacy.compactions", **{"soulacy.agent.id": "reader"}) == len(events)
    for event in events:
        attributes = event.attributes or {}
        assert attributes["soulacy.compaction.allowance"] == 1000  # 1,200 minus 200
        after = attributes["soulacy.compaction.tokens_after"]
        before = attributes["soulacy.compaction.tokens_before"]
        assert isinstance(after, int)
        assert isinstance(before, int)
        assert after <= 1000 < before
        assert isinstance(attributes["soulacy.turn"], int)
    chats = t.named("chat")
    compacted = [c for c in chats if (c.attributes or {}).get("soulacy.llm.compacted")]
    assert len(compacted) == len(events)  # each compacted call says so
    assert not (chats[0].attributes or {}).get("soulacy.llm.compacted")  # the first fits


async def test_a_run_that_fits_has_no_compaction(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced(SMALL)
    small_agent(workspace, 1)
    await t.kernel.run("reader", "read one part")
    assert t.metric("soulacy.compactions") == 0
    assert not [e for e in t.one("invoke_agent reader").events if e.name == "context.compacted"]


async def test_a_streamed_reply_is_the_output_message_of_its_chat_span_when_recorded(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    t = traced("otel:\n  capture_content: true\n  max_content_chars: 30\n")
    reply = "the answer is 42, and my key is api_key=sk-abcdefghijklmnop, as you see"
    workspace.scripted_agent("s", [{"text": reply}])
    await t.kernel.run("s", "hi", stream=True)
    [chat] = t.named("chat")
    [message] = json.loads(str(chat.attributes["gen_ai.output.messages"]))
    assert message["role"] == "assistant"
    assert message["finish_reason"] == "stop"
    text = message["parts"][0]["content"]
    assert text.startswith("the answer is 42")
    assert len(text) == 31  # max_content_chars, then "…"
    assert "sk-abcdefghijklmnop" not in text
    # the events carry no messages sent: the request is on the run span only
    assert "gen_ai.input.messages" not in (chat.attributes or {})


async def test_replies_are_not_recorded_on_chat_spans_by_default_or_unstreamed(
    traced: Callable[..., Traced], workspace: Workspace
) -> None:
    off = traced()
    workspace.scripted_agent("s", [{"text": "private"}], repeat=True)
    await off.kernel.run("s", "hi", stream=True)
    assert "gen_ai.output.messages" not in (off.named("chat")[0].attributes or {})
    on = traced("otel:\n  capture_content: true\n")
    await on.kernel.run("s", "hi")  # not streamed: no text.delta, so no text on the chat span
    assert "gen_ai.output.messages" not in (on.named("chat")[0].attributes or {})
    run = on.one("invoke_agent s").attributes or {}
    assert json.loads(str(run["gen_ai.output.messages"]))[0]["parts"][0]["content"] == "private"
