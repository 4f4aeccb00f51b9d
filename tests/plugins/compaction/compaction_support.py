"""Builders and checks shared by the compaction tests (plain functions, no fixtures)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from soulacy.kernel import Kernel, Tool
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, ToolSpec, Usage
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.compaction import PREFIX
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.testing import throwaway_plugin

SYSTEM = Message("system", "You are a careful agent. Use the tools.")
GOAL = Message("user", "GOAL: find out why the nightly build fails and fix it.")
TOOLS = [
    ToolSpec(
        "read",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
]


def call(i: int, name: str = "read", **arguments: Any) -> Message:
    return Message(
        "assistant", "", tool_calls=(ToolCall(f"call-{i}", name, arguments or {"path": f"f{i}"}),)
    )


def result(i: int, text: str, name: str = "read") -> Message:
    return Message("tool", text, tool_call_id=f"call-{i}", name=name)


def lines(tag: str, chars: int) -> str:
    """About ``chars`` characters of numbered lines, so that excerpts can be traced back."""
    line = len(f"{tag} line 000000\n")
    return "".join(f"{tag} line {n:06d}\n" for n in range(chars // line + 1))[:chars]


def exchange(i: int, chars: int = 200) -> list[Message]:
    return [call(i), result(i, lines(f"result {i}", chars))]


def conversation(turns: int, chars: int = 200, latest: str | None = None) -> list[Message]:
    """The system instructions, the goal, ``turns`` tool exchanges, then an optional request
    followed by one more exchange (so that the latest request is not at the end)."""
    messages = [SYSTEM, GOAL]
    for i in range(turns):
        messages += exchange(i, chars)
    if latest is not None:
        messages.append(Message("user", latest))
        messages += exchange(turns, chars)
    return messages


def markers(view: Sequence[Message]) -> list[Message]:
    return [m for m in view if "compaction" in m.meta]


def _results_after(messages: Sequence[Message], index: int) -> list[str | None]:
    found = []
    for later in messages[index + 1 :]:
        if later.role != "tool":
            break
        found.append(later.tool_call_id)
    return found


def assert_pairs_whole(view: Sequence[Message], original: Sequence[Message]) -> None:
    """Every tool call in the view is followed by exactly the results that followed it in the
    original, and every result in the view follows the call that asked for it."""
    # Messages with tool calls are never copied, so identity finds them in the original.
    after = {id(m): _results_after(original, i) for i, m in enumerate(original) if m.tool_calls}
    for index, message in enumerate(view):
        if message.tool_calls:
            assert _results_after(view, index) == after[id(message)]
        if message.role == "tool":
            j = index
            while j > 0 and view[j - 1].role == "tool":
                j -= 1
            assert j > 0, f"tool result {message.tool_call_id} opens the view"
            assert message.tool_call_id in {c.id for c in view[j - 1].tool_calls}, (
                f"tool result {message.tool_call_id} is separated from its call"
            )


NUMBER = r"([\d,]+)"


def number(text: str) -> int:
    return int(text.replace(",", ""))


def parse_omission(content: str) -> tuple[int, int, int, int]:
    """(omitted, original, head, tail) from the omission line of a cut text."""
    found = re.search(
        rf"\[… {NUMBER} of {NUMBER} characters omitted; kept the first {NUMBER} and the last"
        rf" {NUMBER} …\]",
        content,
    )
    assert found, content[:500]
    omitted, original, head, tail = (number(g) for g in found.groups())
    return omitted, original, head, tail


def parse_header(content: str) -> dict[str, Any]:
    """The counts a marker's header states."""
    found = re.match(
        re.escape(PREFIX) + rf" {NUMBER} earlier messages? \((.*?); {NUMBER} characters\)",
        content,
    )
    assert found, content[:300]
    roles = {}
    for part in found.group(2).split(", "):
        n, role = part.split(" ")
        roles[role] = number(n)
    out: dict[str, Any] = {
        "messages": number(found.group(1)),
        "roles": roles,
        "chars": number(found.group(3)),
    }
    kept = re.search(
        rf"Excerpts of the latest {NUMBER} follow, keeping {NUMBER} characters; {NUMBER}"
        " characters are omitted",
        content,
    )
    if kept:
        out["excerpted"], out["kept"], out["omitted"] = (number(g) for g in kept.groups())
    else:
        whole = re.search(rf"All {NUMBER} characters are omitted", content)
        assert whole, content[:300]
        out["excerpted"], out["kept"], out["omitted"] = 0, 0, number(whole.group(1))
    return out


ModelFunction = Callable[[ModelRequest, int], "ModelReply | str"]


def model_plugin(
    function: ModelFunction,
    *,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    tools: Sequence[Tool] = (),
    name: str = "fn",
) -> Any:
    """A throwaway plugin with a provider type ``name`` that answers with ``function`` and
    reports the given capacity, plus ``tools``."""
    capacity = ModelCapacity(context_window, max_output_tokens)
    return throwaway_plugin(
        "compaction-test-model",
        soulacy_provider_types=lambda: [
            ProviderType(
                name,
                lambda n, config, kernel: ScriptedProvider(n, function=function, capacity=capacity),
            )
        ],
        soulacy_tools=lambda kernel, agent_id: list(tools),
    )


def tool_reply(i: int, name: str = "read", **arguments: Any) -> ModelReply:
    message = Message(
        "assistant", "", tool_calls=(ToolCall(f"call-{i}", name, arguments or {"path": f"f{i}"}),)
    )
    return ModelReply(message, Usage(0, 1), "tool_calls")


def text_reply(text: str) -> ModelReply:
    return ModelReply(Message("assistant", text), Usage(0, 1), "stop")


async def history(kernel: Kernel, agent_id: str, session_id: str) -> list[Message]:
    loaded: list[Message] = await kernel.store().load_history(agent_id, session_id)
    return loaded
