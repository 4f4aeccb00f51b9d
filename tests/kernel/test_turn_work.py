"""What a turn now works out once (decision 0049): each answer must be what it was before.

Hook arguments taken by ``itemgetter``, a tool's argument check and asyncness made with the
tool, JSON encoders built once, the model request kept while nothing in it changes, and the
costs plugin's "any shared limit?" kept per configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pluggy
import pytest

from soulacy.kernel import Kernel, Tool, json_encoder
from soulacy.kernel._tools import arguments_checker, schema_of, validate_arguments
from soulacy.kernel.messages import ModelReply, ModelRequest
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.scripted import ScriptedProvider
from soulacy.testing import Workspace, throwaway_plugin

hookspec = pluggy.HookspecMarker("soulacy")
impl = pluggy.HookimplMarker("soulacy")


class Specs:
    @hookspec
    def soulacy_pair(self, x: int, y: int) -> int:  # type: ignore[empty-body]
        """Every answer."""

    @hookspec(firstresult=True)
    def soulacy_pair_first(self, x: int, y: int) -> int | None:
        """The first answer."""


class NoArguments:
    @impl
    def soulacy_pair(self) -> int:
        return 0

    @impl
    def soulacy_pair_first(self) -> None:
        return None


class OnlyY:
    @impl
    def soulacy_pair(self, y: int) -> int:
        return y

    @impl
    def soulacy_pair_first(self, y: int) -> int | None:
        return None if y < 0 else y * 10


class Reversed:
    @impl
    def soulacy_pair(self, y: int, x: int) -> int:
        return x * 100 + y


SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]},
    {
        "type": "object",
        "properties": {"i": {"type": "integer", "description": "n"}, "s": {"type": "string"}},
        "required": ["i"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"f": {"type": "number"}, "b": {"type": "boolean"}}},
    {"type": "object", "properties": {"e": {"enum": ["a", "b"]}}},  # not simple: full walk
    {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "integer"}}}},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {}}}},
    {"type": "object", "enum": [{"i": 1}]},
    {"properties": {"i": {"type": "integer"}}},  # no type: full walk
    {},
]
ARGUMENTS: list[Any] = [
    {},
    {"i": 1},
    {"i": True},
    {"i": 1.5},
    {"i": 1, "s": "x"},
    {"i": 1, "s": 2},
    {"i": 1, "zzz": 0},
    {"f": 1, "b": False},
    {"f": "1", "b": 0},
    {"e": "a"},
    {"e": "c"},
    {"l": [1, 2]},
    {"l": [1, "2"]},
    {"o": {}},
    {"o": []},
    [],
    "text",
    None,
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_the_argument_check_made_once_says_what_the_full_walk_says(
    schema: dict[str, Any],
) -> None:
    check = arguments_checker(schema)
    for arguments in ARGUMENTS:
        assert check(arguments) == validate_arguments(schema, arguments), arguments


async def f(i: int, s: str = "") -> str:
    return f"{i}{s}"


def g(i: int) -> int:
    return i


class AsyncCallable:
    async def __call__(self, i: int) -> int:
        return i


def test_a_tool_works_out_its_check_and_asyncness_again_when_evolved() -> None:
    tool = Tool.from_function(f)
    assert tool.is_async
    assert tool.check_arguments({"i": 1}) == []
    assert tool.check_arguments({"i": "1"}) == ["arguments.i: expected integer, got str"]
    plain = attrs.evolve(tool, function=g, parameters=schema_of(g))
    assert not plain.is_async
    assert plain.check_arguments({"i": 1, "s": "x"}) == ["arguments.s: unexpected argument"]
    assert Tool("c", "", {"type": "object"}, AsyncCallable()).is_async
    assert tool == Tool.from_function(f)  # the worked-out fields take no part in equality


VALUES: list[Any] = [
    {"b": 1, "a": [1, 2.5, None, True, 'é\n"x\u2028']},
    "plain",
    1.0,
    math.nan,
    [math.inf, -math.inf],
    {1: 2, "x": {"y": ()}},
    {True: 1, None: 2, 1.5: 3},
    {"o": object()},
    {(1, 2): 3},
]
OPTIONS: list[dict[str, Any]] = [
    {},
    {"sort_keys": True, "ensure_ascii": False, "default": str},
    {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "default": str},
]


def _outcome(encode: Callable[[Any], str], value: Any) -> Any:
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        return type(exc)


@pytest.mark.parametrize("options", OPTIONS, ids=range(len(OPTIONS)))
def test_an_encoder_made_once_writes_what_json_dumps_writes(options: dict[str, Any]) -> None:
    encode = json_encoder(**options)
    for value in VALUES:
        expected = _outcome(lambda v: json.dumps(v, **options), value)
        assert _outcome(encode, value) == expected, value
    circular: list[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular reference"):
        encode(circular)
    assert encode({"after": "a failure"}) == json.dumps({"after": "a failure"}, **options)


def _recording_kernel(root: Path, requests: list[ModelRequest]) -> Kernel:
    folder = Workspace(root)

    def model(request: ModelRequest, index: int) -> ModelReply | str:
        requests.append(request)
        return "done"

    async def probe(run: Any) -> None:
        await run.call_model(tools=False)
        await run.call_model()
        await run.call_model()
        await run.call_model(tools=False)
        run.complete("ok")

    async def step(i: int) -> str:
        """A tool."""
        return str(i)

    tool = Tool.from_function(step)
    folder.write_agent("a", {"llm": {"provider": "rec"}, "tools": ["step"]})
    plugin = throwaway_plugin(
        "rec",
        soulacy_provider_types=lambda: [
            ProviderType("rec", lambda name, config, kernel: ScriptedProvider(name, function=model))
        ],
        soulacy_tools=lambda kernel, agent_id: [tool],
        soulacy_run_strategy=lambda kernel, run: probe,
    )
    return Kernel.load(root, plugins=["no:sqlite_store"], extra_plugins=[plugin], autoload=False)


async def test_each_model_call_is_offered_the_tools_it_asked_for(tmp_path: Path) -> None:
    requests: list[ModelRequest] = []
    kernel = _recording_kernel(tmp_path, requests)
    result = await kernel.run("a", "go")
    assert result.status == "completed", result.metadata()
    assert [[t.name for t in r.tools] for r in requests] == [[], ["step"], ["step"], []]
    assert all(r.messages[0].content for r in requests)
    assert [len(r.messages) for r in requests] == [5, 5, 5, 5]  # the run's list, grown in place
    await kernel.aclose()


LOOP = [{"tool": "nope", "usage": {"input": 1000, "output": 1000}}]


async def test_a_token_quota_set_after_a_run_holds_for_the_next(
    workspace: Workspace, make_kernel: Callable[..., Kernel]
) -> None:
    workspace.write_config("runtime:\n  no_progress_limit: 0\n")
    workspace.scripted_agent("a", LOOP, repeat=True, max_turns=10, budget={"max_tokens": 0})
    kernel = make_kernel(plugins=["no:sqlite_store"])
    first = await kernel.run("a", "go")
    assert first.incomplete_reason == "max_turns"
    kernel.update_config({"rate_limit": {"tokens_per_minute": 5000}})
    second = await kernel.run("a", "go")
    assert (second.status, second.incomplete_reason) == ("incomplete", "token_quota_per_minute")


TWO_CALLS = [
    {"tool": "echo", "arguments": {"text": "hi", "api_key": "sk-abcdef1234567890"}, "id": "c1"},
    {"tool": "echo", "arguments": {"text": "again"}, "id": "c2"},
    {"text": "done"},
]


async def test_a_calls_arguments_are_redacted_once_for_its_reservation_reply_and_record(
    workspace: Workspace, make_kernel: Callable[..., Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    from soulacy.plugins.engine import _redaction

    workspace.scripted_agent("a", TWO_CALLS, tools=["tools.py:echo"])
    (workspace.path / "agents" / "a" / "tools.py").write_text(
        "def echo(text: str, api_key: str = '') -> str:\n"
        '    """Says it again."""\n'
        "    return text\n"
    )
    redacted: list[dict[str, Any]] = []
    redact = _redaction.redact_arguments

    def counted(arguments: Any) -> dict[str, Any]:
        redacted.append(dict(arguments))
        return redact(arguments)

    monkeypatch.setattr(_redaction, "redact_arguments", counted)
    kernel = make_kernel(plugins=["no:sqlite_store"])
    result = await kernel.run("a", "go", session_id="s")
    assert result.status == "completed", result.metadata()
    # Each call is reserved (its tool may act), stored with its reply, stored as a record.
    assert [a["text"] for a in redacted] == ["hi", "again"]
    store = kernel.store()
    records = await store.load_tool_records(result.run_id)
    assert records["c1"].arguments == {"text": "hi", "api_key": "***"}
    assert records["c2"].arguments == {"text": "again"}
    history = await store.load_history("a", "s", None, None)
    calls = [call for message in history for call in message.tool_calls]
    assert [call.arguments for call in calls] == [
        {"text": "hi", "api_key": "***"},
        {"text": "again"},
    ]
    await kernel.aclose()
