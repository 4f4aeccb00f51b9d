"""``check_tool_loop(plugin)`` and ``check_run_strategy(plugin)``: the conformance kits of the
two hooks that drive a run, ``soulacy_tool_loop`` and ``soulacy_run_strategy``.

Both check through ordinary runs (``kernel.run``). Each check builds a kernel of its own on a
temporary workspace, with the builtin plugins (the memory store), the plugin under test and the
kit's plugin, which contributes a scripted model (provider type ``loop-kit``: each check writes
its replies and reads what it was sent) and two real Python tools, ``kit_add(a, b)`` (a plain
function, run in a worker thread) and ``kit_note(text, pause=0)`` (``async def``; the text
``fail`` raises). The kit also makes sure that what it checks is what ran: every run of a tool
loop check must be driven by the plugin's loop, asked through ``run.tool_loop`` (a run strategy
that runs a loop of its own fails every check, as the builtin ``classic`` strategy once did),
and every run of a run strategy check by the plugin's strategy.

Every failure is an AssertionError ``<kit> check <name>: <what>: expected <E>, got <G>``; an
unexpected exception out of a run is reported the same way. ``only=`` runs the checks it names
(of :data:`TOOL_LOOP_CHECK_NAMES` or :data:`RUN_STRATEGY_CHECK_NAMES`) and no other, so each
can run alone. Each check has ``time_per_check`` seconds: a loop that never stops fails, it does
not hang the suite (unless it never lets Trio in: then nothing can stop it), and the kit's model
refuses a run's 41st call with a ProviderError, so that a runaway loop fails fast.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from soulacy.kernel import (
    AGENT_FILE,
    AGENTS_DIR,
    BUILTIN_PLUGINS,
    CONFIG_FILE,
    Kernel,
    Tool,
    hookimpl,
)
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, ToolCall, Usage
from soulacy.kernel.providers import ProviderConfig, ProviderError, ProviderType, TextSink

from ._store import expect, expect_that, select_checks, show

if TYPE_CHECKING:
    from soulacy.kernel import RunResult
    from soulacy.kernel.engine import Run

__all__ = [
    "RUN_STRATEGY_CHECK_NAMES",
    "TOOL_LOOP_CHECK_NAMES",
    "check_run_strategy",
    "check_tool_loop",
]

Limit = Literal["turns", "steps"]
Respond = Callable[[ModelRequest, int], ModelReply]  # (request, index in the run) -> reply

PROVIDER = "loop-kit"  # the provider type of the kit's model
MODEL_CALL_CAP = 40  # calls of one run's model: more than any check needs
USAGE = Usage(11, 3)  # what every reply of the kit's model used
QUESTION = "What is 2 + 3? Take a note of the sum."
ANSWER = "The sum of 2 and 3 is 5."
STEPS_AGENT = "kit-steps"  # the agent whose strategy (the kit's) runs run.tool_loop("steps")
# The step timeout check: a step (one reply's four calls of kit_note, 0.2 s each) outlasts it
# by far, while each call stays within the tool and model timeouts (tool <= llm <= step).
STEP_TIMEOUTS = "runtime:\n  timeouts: {step: 300ms, llm: 300ms, tool: 250ms}\n"
PAUSE = 0.2


class _Misuse(ValueError):
    """The kit was given something it cannot check (raised as it is, not as a failure)."""


# -- the kit's model and tools ----------------------------------------------------------------


def _reply(text: str = "", *calls: ToolCall) -> ModelReply:
    finish = "tool_calls" if calls else "stop"
    return ModelReply(Message("assistant", text, tool_calls=calls), USAGE, finish)


def _script(*replies: ModelReply) -> Respond:
    """The model plays ``replies``, one a call; after them it says the script has ended."""

    def respond(request: ModelRequest, index: int) -> ModelReply:
        return replies[index] if index < len(replies) else _reply("(the kit's script has ended)")

    return respond


def _forever(prefix: str) -> Respond:
    """The model calls ``kit_add`` on every reply (a fresh call id and result each time)."""

    def respond(request: ModelRequest, index: int) -> ModelReply:
        return _reply("", ToolCall(f"{prefix}-{index + 1}", "kit_add", {"a": index, "b": 1}))

    return respond


def _agent() -> Respond:
    """The model as an agent answers the question: with tools offered it adds the numbers
    first, and answers once it has a tool result (or when no tools are offered)."""

    def respond(request: ModelRequest, index: int) -> ModelReply:
        last = request.messages[-1] if request.messages else None
        if request.tools and (last is None or last.role != "tool"):
            return _reply("", ToolCall(f"kit-call-{index + 1}", "kit_add", {"a": 2, "b": 3}))
        return _reply(ANSWER)

    return respond


def _greedy() -> Respond:
    """The model calls a tool whenever tools are offered (a fresh result each time)."""
    tools = _forever("kit-call")

    def respond(request: ModelRequest, index: int) -> ModelReply:
        return tools(request, index) if request.tools else _reply(ANSWER)

    return respond


@attrs.define
class _Model:
    """What the kit's provider answers with; the requests of the current run, as sent."""

    respond: Respond = attrs.Factory(_script)
    requests: list[ModelRequest] = attrs.Factory(list)

    @property
    def calls(self) -> int:
        return len(self.requests)

    def play(self, respond: Respond) -> None:
        self.respond, self.requests = respond, []

    def reply(self, request: ModelRequest) -> ModelReply:
        if self.calls >= MODEL_CALL_CAP:
            raise ProviderError(
                f"the loop kit's model refuses call {self.calls + 1} of one run (no check needs"
                f" more than {MODEL_CALL_CAP}): does the loop never stop?"
            )
        # The view a compactor returns may be the run's own list, which grows: kept as sent.
        sent = attrs.evolve(request, messages=tuple(request.messages), tools=tuple(request.tools))
        self.requests.append(sent)
        return self.respond(sent, self.calls - 1)


class _Provider:
    def __init__(self, name: str, model: _Model) -> None:
        self.name, self._model = name, model

    def capacity(self, model: str | None) -> None:
        return None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        await trio.lowlevel.checkpoint()  # a loop that never stops can still be cancelled
        reply = self._model.reply(request)
        if on_text is not None and reply.message.content:
            await on_text(reply.message.content)
        return reply

    async def aclose(self) -> None:
        return None


def _tools(executed: list[tuple[str, Any]]) -> list[Tool]:
    def kit_add(a: int, b: int) -> int:
        """Add two whole numbers."""
        executed.append(("kit_add", (a, b)))
        return a + b

    async def kit_note(text: str, pause: float = 0.0) -> str:
        """Take a note of a text (after pause seconds). The text 'fail' fails."""
        executed.append(("kit_note", text))
        if pause:
            await trio.sleep(pause)
        if text == "fail":
            raise ValueError("the kit's note tool was asked to fail")
        return f"noted: {text}"

    return [Tool.from_function(kit_add), Tool.from_function(kit_note)]


async def _steps(run: Run) -> None:
    """The kit's strategy for :data:`STEPS_AGENT`: the tool loop, each model call a step."""
    await run.tool_loop("steps")


class _KitPlugin:
    """The kit's own plugin: its model and tools, and what it saw answer the hooks."""

    name = "loop-kit"

    def __init__(self) -> None:
        self.model = _Model()
        self.executed: list[tuple[str, Any]] = []  # (tool, arguments) of each execution
        self.tools = _tools(self.executed)

    @hookimpl
    def soulacy_provider_types(self) -> Sequence[ProviderType]:
        return [ProviderType(PROVIDER, self._provider)]

    def _provider(self, name: str, config: ProviderConfig, kernel: Kernel) -> _Provider:
        return _Provider(name, self.model)

    @hookimpl
    def soulacy_tools(self) -> Sequence[Tool]:
        return self.tools


class _LoopKitPlugin(_KitPlugin):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str | None, str]] = []  # (the answering plugin, limit) per loop

    @hookimpl(wrapper=True)
    def soulacy_tool_loop(self, kernel: Kernel, run: Run) -> Generator[None, Any, Any]:
        answer = yield
        if answer is None:
            return None
        _, plugin = kernel.pm.first_result("soulacy_tool_loop", kernel=kernel, run=run)
        asked = self.asked

        async def loop(run: Run, limit: Limit = "turns") -> None:
            asked.append((plugin, limit))
            await answer(run, limit)

        return loop

    @hookimpl
    def soulacy_run_strategy(self, run: Run) -> Callable[[Run], Awaitable[None]] | None:
        return _steps if run.agent_id == STEPS_AGENT else None


class _StrategyKitPlugin(_KitPlugin):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str | None] = []  # the plugin whose strategy drove each run

    @hookimpl(wrapper=True)
    def soulacy_run_strategy(self, kernel: Kernel, run: Run) -> Generator[None, Any, Any]:
        answer = yield
        _, plugin = kernel.pm.first_result("soulacy_run_strategy", kernel=kernel, run=run)
        self.asked.append(plugin)
        return answer


# -- one check's workspace, kernel and runs ---------------------------------------------------


class _Kit:
    """One check: its workspace (a temporary folder), its kernel (made at the first run, once
    the check has written its agents) and its runs."""

    def __init__(self, kind: str, plugin: object, helper: _KitPlugin, agent: Mapping[str, Any]):
        self.kind, self.plugin, self.helper = kind, plugin, helper
        self.defaults = dict(agent)  # SOUL.yaml keys of every agent of the check
        self._folder = tempfile.TemporaryDirectory(prefix="soulacy-loop-kit-")
        self.path = Path(self._folder.name)
        self._kernel: Kernel | None = None
        self.plugin_name = ""
        self._runs = itertools.count(1)

    @property
    def model(self) -> _Model:
        return self.helper.model

    @property
    def executed(self) -> list[tuple[str, Any]]:
        return self.helper.executed

    def config(self, text: str) -> None:
        (self.path / CONFIG_FILE).write_text(text, encoding="utf-8")

    def agent(self, agent_id: str, **keys: Any) -> None:
        soul = {
            **self.defaults,
            "llm": {"provider": PROVIDER},
            "tools": ["kit_add", "kit_note"],
            **keys,
        }
        folder = self.path / AGENTS_DIR / agent_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / AGENT_FILE).write_text(json.dumps(soul), encoding="utf-8")  # JSON is YAML

    @property
    def kernel(self) -> Kernel:
        if self._kernel is None:
            builtin = isinstance(self.plugin, ModuleType) and self.plugin.__name__ in {
                module for _, module in BUILTIN_PLUGINS
            }
            extras = [self.helper] if builtin else [self.plugin, self.helper]
            kernel = Kernel.load(
                self.path,
                plugins=["no:sqlite_store"],
                autoload=False,
                environ={},
                extra_plugins=extras,
            )
            self._kernel = kernel
            name = kernel.pm.get_name(self.plugin)
            if name is None:
                raise _Misuse(
                    f"{self.kind} kit: {show(self.plugin)} is not registered in the kit's"
                    " kernels (is it blocked, or its name another plugin's?)"
                )
            self.plugin_name = name
        return self._kernel

    async def run(self, agent_id: str, respond: Respond, *, run_id: str | None = None) -> RunResult:
        """Run ``agent_id`` on ``respond``'s model; what raises out of it is a failure."""
        kernel = self.kernel
        self.model.play(respond)
        run_id = run_id or f"kit-run-{next(self._runs)}"
        try:
            return await kernel.run(agent_id, QUESTION, run_id=run_id, session_id=run_id)
        except Exception as exc:
            raise AssertionError(
                f"the run of agent {agent_id!r}: expected it to end with a status"
                f" (run.complete or a RunStop), got {type(exc).__name__}: {show(str(exc))}"
            ) from exc

    async def aclose(self) -> None:
        try:
            if self._kernel is not None:
                with trio.CancelScope(shield=True):
                    await self._kernel.aclose()
        finally:
            self._folder.cleanup()


async def _run_checks(
    kind: str,
    checks: Sequence[tuple[str, Callable[[_Kit], Awaitable[None]]]],
    selected: Sequence[str],
    make: Callable[[], _Kit],
    time_per_check: float,
) -> None:
    for name, check in checks:
        if name not in selected:
            continue
        kit = make()
        try:
            with trio.fail_after(time_per_check):
                await check(kit)
        except trio.TooSlowError:
            raise AssertionError(
                f"{kind} check {name}: its runs: expected them to end within"
                f" {time_per_check:g}s, got a run still going (does the loop never stop?)"
            ) from None
        except _Misuse:
            raise
        except AssertionError as exc:
            raise AssertionError(f"{kind} check {name}: {exc}") from exc
        except Exception as exc:
            raise AssertionError(
                f"{kind} check {name}: the check's runs: expected no exception,"
                f" got {type(exc).__name__}: {show(str(exc))}"
            ) from exc
        finally:
            await kit.aclose()


def _outline(messages: Sequence[Message]) -> list[str]:
    """Messages in brief, for a failure: ``role: content`` or ``role → call ids``."""
    shown = []
    for m in messages:
        if m.tool_calls:
            shown.append(f"{m.role} → {', '.join(c.id for c in m.tool_calls)}")
        elif m.role == "tool":
            shown.append(f"tool {m.tool_call_id}: {m.content[:40]}")
        else:
            shown.append(f"{m.role}: {m.content[:40]}")
    return shown


def _expect_results(
    request: ModelRequest, calls: Sequence[ToolCall], contents: Sequence[str], what: str
) -> None:
    """In ``request``, after the (last) reply that asked for ``calls``, their results in order
    (before the next reply): each call's id with its content."""
    messages = list(request.messages)
    ids = [c.id for c in calls]
    at = next(
        (
            n
            for n in reversed(range(len(messages)))
            if messages[n].role == "assistant" and [c.id for c in messages[n].tool_calls] == ids
        ),
        None,
    )
    expect_that(
        at is not None,
        f"{what}: the reply that asked for the calls {ids}",
        "in the messages sent to the model (each reply goes back to it, with its calls)",
        _outline(messages),
    )
    assert at is not None
    results: list[Message] = []
    for message in messages[at + 1 :]:
        if message.role == "assistant":
            break
        if message.role == "tool":
            results.append(message)
    got = [(m.tool_call_id, m.content) for m in results]
    expect(
        got,
        list(zip(ids, contents, strict=True)),
        f"{what}: the tool results after the reply that asked for them, as (call id, content)"
        " in the order of the calls",
    )


# -- the tool loop checks ---------------------------------------------------------------------


def _expect_loop(kit: _Kit, limit: Limit, what: str) -> None:
    """The run was driven by the plugin's tool loop, asked through ``run.tool_loop(limit)``."""
    assert isinstance(kit.helper, _LoopKitPlugin)
    asked, kit.helper.asked = kit.helper.asked, []
    wanted = f"the loop of the plugin {kit.plugin_name!r}, asked by run.tool_loop({limit!r})"
    if not asked:
        raise AssertionError(
            f"the tool loop of {what}: expected {wanted}, got no call of run.tool_loop (does the"
            " run strategy run a loop of its own?)"
        )
    for plugin, used in asked:
        expect_that(
            plugin == kit.plugin_name,
            f"the tool loop of {what}",
            f"{wanted} (does it answer soulacy_tool_loop for every run?)",
            f"the loop of the plugin {plugin!r}",
        )
        expect(used, limit, f"the limit the tool loop of {what} was asked with")


async def _tool_calls(kit: _Kit) -> None:
    """Each tool call of a reply is executed once, in order, through ``run.call_tool`` with
    the call's id (its tool record has that id); then the answer completes the run."""
    kit.agent("kit-tools")
    calls = (
        ToolCall("kit-call-1", "kit_add", {"a": 2, "b": 3}),
        ToolCall("kit-call-2", "kit_note", {"text": "2 + 3"}),
    )
    first = _reply("I will add the numbers, then note the sum.", *calls)
    result = await kit.run("kit-tools", _script(first, _reply(ANSWER)))
    what = "a run whose first reply asks for two tool calls (with text beside them)"
    _expect_loop(kit, "turns", what)
    expect(
        kit.executed,
        [("kit_add", (2, 3)), ("kit_note", "2 + 3")],
        f"the tools executed in {what}, each call once, in order",
    )
    records = await kit.kernel.store().load_tool_records(result.run_id)
    expect(
        sorted(records),
        ["kit-call-1", "kit-call-2"],
        f"the call ids of the tool records of {what} (run.call_tool(name, arguments, call.id)"
        " records each call under the model's id)",
    )
    expect(result.tool_calls, 2, f"the tool_calls of {what}")
    expect(
        (result.status, result.reply),
        ("completed", ANSWER),
        f"{what}, then an answer: (status, reply)",
    )


async def _results(kit: _Kit) -> None:
    """The results of a reply's tool calls reach the next model call, each under its call's
    id, in the order of the calls."""
    kit.agent("kit-results")
    first = (
        ToolCall("kit-call-1", "kit_add", {"a": 2, "b": 3}),
        ToolCall("kit-call-2", "kit_note", {"text": "five"}),
    )
    second = (ToolCall("kit-call-3", "kit_add", {"a": 5, "b": 7}),)
    script = _script(_reply("", *first), _reply("", *second), _reply(ANSWER))
    result = await kit.run("kit-results", script)
    what = "a run of two replies with tool calls, then an answer"
    _expect_loop(kit, "turns", what)
    expect(kit.model.calls, 3, f"the model calls of {what}")
    _expect_results(kit.model.requests[1], first, ["5", "noted: five"], "the second model call")
    _expect_results(kit.model.requests[2], second, ["12"], "the third model call")
    expect((result.status, result.reply), ("completed", ANSWER), f"{what}: (status, reply)")


async def _answer(kit: _Kit) -> None:
    """A first reply that is a plain answer (text, no tool calls) completes the run with it."""
    kit.agent("kit-answer")
    result = await kit.run("kit-answer", _script(_reply(ANSWER)))
    what = "a run whose first reply is a plain answer"
    _expect_loop(kit, "turns", what)
    expect(
        (result.status, result.reply, result.incomplete_reason),
        ("completed", ANSWER, None),
        f"{what}: (status, reply, incomplete_reason)",
    )
    expect((kit.model.calls, result.tool_calls), (1, 0), f"(model calls, tool calls) of {what}")


async def _tool_errors(kit: _Kit) -> None:
    """Failed tool calls (a tool that raises, invalid arguments, an unknown tool) are results
    the model reads, marked as errors: the run goes on to the answer."""
    kit.agent("kit-errors")
    calls = (
        ToolCall("kit-call-1", "kit_note", {"text": "fail"}),
        ToolCall("kit-call-2", "kit_add", {"a": "two", "b": 3}),
        ToolCall("kit-call-3", "kit_missing", {}),
    )
    result = await kit.run("kit-errors", _script(_reply("", *calls), _reply(ANSWER)))
    what = "a run whose three tool calls fail (a tool raises, invalid arguments, unknown tool)"
    _expect_loop(kit, "turns", what)
    expect(
        (result.status, result.reply, result.incomplete_reason),
        ("completed", ANSWER, None),
        f"{what}, then an answer: (status, reply, incomplete_reason)",
    )
    expect(kit.model.calls, 2, f"the model calls of {what}, then an answer")
    sent = [
        (m.tool_call_id, m.is_error, m.content.startswith("error: "))
        for m in kit.model.requests[1].messages
        if m.role == "tool"
    ]
    expect(
        sent,
        [(c.id, True, True) for c in calls],
        "the failed calls' results in the next model call: (call id, is_error, starts with"
        " 'error: ')",
    )


async def _max_turns(kit: _Kit) -> None:
    """``max_turns`` ends the run ``incomplete`` (``max_turns``) before the model call that
    would exceed it: each model call is one turn (``run.turn()`` before it)."""
    kit.agent("kit-turns", max_turns=3)
    result = await kit.run("kit-turns", _forever("kit-call"))
    what = "a run under max_turns: 3 whose model asks for a tool call on every reply"
    _expect_loop(kit, "turns", what)
    expect(
        (result.status, result.incomplete_reason),
        ("incomplete", "max_turns"),
        f"{what}: (status, incomplete_reason)",
    )
    expect((kit.model.calls, result.turns), (3, 3), f"the (model calls, turns) of {what}")


async def _steps_check(kit: _Kit) -> None:
    """With ``limit="steps"`` each model call is a reasoning step: ``reasoning.max_steps``
    ends the run ``incomplete`` (``max_steps``), not ``max_turns``."""
    kit.agent(STEPS_AGENT, max_turns=6, reasoning={"max_steps": 2})
    result = await kit.run(STEPS_AGENT, _forever("kit-call"))
    what = (
        "a run of run.tool_loop('steps') under reasoning.max_steps: 2 and max_turns: 6 whose"
        " model asks for a tool call on every reply"
    )
    _expect_loop(kit, "steps", what)
    expect(
        (result.status, result.incomplete_reason),
        ("incomplete", "max_steps"),
        f"{what}: (status, incomplete_reason)",
    )
    expect(kit.model.calls, 2, f"the model calls (each a step) of {what}")


async def _step_timeout(kit: _Kit) -> None:
    """Each step (a model call and the tool calls of its reply) is timed with the policy's
    step timeout (``run.start_step``): a step that outlasts it ends the run ``incomplete``
    (``step_timeout``), though each of its calls is within its own timeout."""
    kit.config(STEP_TIMEOUTS)
    kit.agent("kit-slow")
    calls = [
        ToolCall(f"kit-call-{n}", "kit_note", {"text": f"slow {n}", "pause": PAUSE})
        for n in (1, 2, 3, 4)
    ]
    result = await kit.run("kit-slow", _script(_reply("", *calls), _reply(ANSWER)))
    what = (
        "a run under runtime.timeouts {step: 300ms, llm: 300ms, tool: 250ms} whose first reply"
        f" asks for four tool calls of {PAUSE:g}s each"
    )
    _expect_loop(kit, "turns", what)
    expect(
        (result.status, result.incomplete_reason),
        ("incomplete", "step_timeout"),
        f"{what}: (status, incomplete_reason)",
    )


async def _replay(kit: _Kit) -> None:
    """A call id executed before under the run id (a same-id retry) is replayed, not executed
    again: the loop passes the model's call id to ``run.call_tool``."""
    kit.agent("kit-replay")
    call = ToolCall("kit-call-1", "kit_add", {"a": 2, "b": 3})
    script = _script(_reply("", call), _reply(ANSWER))
    first = await kit.run("kit-replay", script, run_id="kit-replay")
    _expect_loop(kit, "turns", "the first attempt of a run")
    expect(
        (first.status, kit.executed),
        ("completed", [("kit_add", (2, 3))]),
        "the first attempt of a run with one tool call: (status, tools executed)",
    )
    second = await kit.run("kit-replay", script, run_id="kit-replay")
    what = "its second attempt (the same run id, the model asking for the same call id)"
    _expect_loop(kit, "turns", what)
    expect(
        kit.executed,
        [("kit_add", (2, 3))],
        f"the tools executed by the first attempt and {what} (a replayed call does not run)",
    )
    expect(
        (second.status, second.reply, second.tool_calls),
        ("completed", ANSWER, 0),
        f"{what}: (status, reply, tool_calls)",
    )
    _expect_results(kit.model.requests[1], (call,), ["5"], f"the second model call of {what}")


TOOL_LOOP_CHECKS: tuple[tuple[str, Callable[[_Kit], Awaitable[None]]], ...] = (
    ("tool_calls", _tool_calls),
    ("results", _results),
    ("answer", _answer),
    ("tool_errors", _tool_errors),
    ("max_turns", _max_turns),
    ("steps", _steps_check),
    ("step_timeout", _step_timeout),
    ("replay", _replay),
)
TOOL_LOOP_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in TOOL_LOOP_CHECKS)


async def check_tool_loop(
    plugin: object,
    *,
    only: str | Iterable[str] | None = None,
    time_per_check: float = 30.0,
) -> None:
    """Check the tool loop that ``plugin`` returns from ``soulacy_tool_loop``, through
    ordinary runs of kernels it is registered in (a builtin plugin's module, such as
    ``soulacy.plugins.classic``, is checked as the kernels load it).

    Each run is driven by the plugin's loop, asked through ``run.tool_loop`` (by the builtin
    ``classic`` strategy, or the kit's own for ``limit="steps"``). The checks
    (:data:`TOOL_LOOP_CHECK_NAMES`): ``tool_calls``, each tool call of a reply executed once,
    in order, through ``run.call_tool`` with its call id; ``results``, their results in the
    next model call, under their ids; ``answer``, a plain text reply completes the run with
    it; ``tool_errors``, failed calls are results the model reads, the run goes on;
    ``max_turns``, the turn limit ends the run ``incomplete`` (``max_turns``) before a model
    call would exceed it; ``steps``, with ``limit="steps"`` each model call is a reasoning step
    (``max_steps``); ``step_timeout``, a step that outlasts the step timeout ends the run
    (``step_timeout``); ``replay``, a call id already executed under the run id (a same-id
    retry) is not executed again.

    A failure is an AssertionError naming the check, what was expected and what came back.
    ``only`` runs the checks it names (one name or several) and no other; an unknown name is a
    ValueError listing them. Each check has ``time_per_check`` seconds.
    """
    selected = select_checks("tool loop", TOOL_LOOP_CHECK_NAMES, only)
    await _run_checks(
        "tool loop",
        TOOL_LOOP_CHECKS,
        selected,
        lambda: _Kit("tool loop", plugin, _LoopKitPlugin(), {}),
        time_per_check,
    )


# -- the run strategy checks ------------------------------------------------------------------


def _expect_strategy(kit: _Kit, what: str) -> None:
    assert isinstance(kit.helper, _StrategyKitPlugin)
    asked, kit.helper.asked = kit.helper.asked, []
    expect_that(
        asked == [kit.plugin_name],
        f"the run strategy of {what}",
        f"the plugin {kit.plugin_name!r}'s soulacy_run_strategy (does it answer for the kit's"
        " agents? agent= gives them the SOUL.yaml keys it needs)",
        f"the strategies of {asked}",
    )


async def _ends(kit: _Kit) -> None:
    """The strategy ends the run: ``run.complete(reply)``, or a ``RunStop`` (raised by it or
    let through from the run's mechanisms); it does not return with the run unfinished."""
    kit.agent("kit-ends")
    result = await kit.run("kit-ends", _agent())
    what = "a run whose model adds the numbers with a tool, then answers"
    _expect_strategy(kit, what)
    _expect_ended(result, what)


def _expect_ended(result: RunResult, what: str) -> None:
    """The strategy ended the run: the engine ends one it left unfinished as ``no_ending``."""
    if not result.finished_at or result.incomplete_reason == "no_ending":
        raise AssertionError(
            f"how {what} ended: expected an ending, run.complete(reply) or a RunStop, got none"
            f" (the strategy returned with the run unfinished: status {result.status!r},"
            f" reason {result.incomplete_reason!r})"
        )


async def _turns(kit: _Kit) -> None:
    """Model calls follow turn boundaries (``run.turn``): the run's turns are counted and the
    run is stored, with the status it ended with."""
    kit.agent("kit-turns")
    result = await kit.run("kit-turns", _agent())
    what = "a run whose model adds the numbers with a tool, then answers"
    _expect_strategy(kit, what)
    if not kit.model.calls:
        return  # a strategy may answer without the model (and end before its first turn)
    expect_that(
        result.turns >= 1,
        f"the turns of {what}, after {kit.model.calls} model call(s)",
        "a turn boundary (run.turn) before the first model call",
        result.turns,
    )
    stored = await kit.kernel.store().get_run(result.run_id)
    expect(
        None if stored is None else stored.status,
        result.status,
        f"the stored status of {what} (run.turn stores the run and what it did)",
    )


async def _usage(kit: _Kit) -> None:
    """Every model call goes through ``run.call_model``: the run counts it and its tokens."""
    kit.agent("kit-usage")
    result = await kit.run("kit-usage", _agent())
    what = "a run whose model adds the numbers with a tool, then answers"
    _expect_strategy(kit, what)
    calls = kit.model.calls
    expect(
        (result.llm_calls, result.input_tokens, result.output_tokens),
        (calls, calls * USAGE.input_tokens, calls * USAGE.output_tokens),
        f"the (llm_calls, input_tokens, output_tokens) of {what}, after {calls} model call(s)"
        f" of {USAGE.input_tokens} input and {USAGE.output_tokens} output tokens each"
        " (run.call_model accounts for each)",
    )


async def _limits(kit: _Kit) -> None:
    """The policy's limits apply to the strategy's model calls: under
    ``budget.max_llm_calls: 3`` the model is called at most 3 times (the budget is checked at
    the turn boundary before each call), and the run ends."""
    kit.agent("kit-limits", budget={"max_llm_calls": 3})
    result = await kit.run("kit-limits", _greedy())
    what = "a run under budget.max_llm_calls: 3 whose model asks for a tool whenever it may"
    _expect_strategy(kit, what)
    expect_that(
        kit.model.calls <= 3,
        f"the model calls of {what}",
        "at most 3 (run.turn before each model call checks the budget)",
        kit.model.calls,
    )
    _expect_ended(result, what)


async def _tools_check(kit: _Kit) -> None:
    """Every tool the strategy runs goes through ``run.call_tool`` (validated, permitted,
    recorded): the run counts each execution, and the store has a record of each."""
    kit.agent("kit-tools")
    result = await kit.run("kit-tools", _agent())
    what = "a run whose model adds the numbers with a tool, then answers"
    _expect_strategy(kit, what)
    executed = len(kit.executed)
    records = await kit.kernel.store().load_tool_records(result.run_id)
    expect(
        (result.tool_calls, len(records)),
        (executed, executed),
        f"the (tool_calls, tool records) of {what}, whose tools ran {executed} time(s)"
        " (run.call_tool counts and records each call)",
    )


RUN_STRATEGY_CHECKS: tuple[tuple[str, Callable[[_Kit], Awaitable[None]]], ...] = (
    ("ends", _ends),
    ("turns", _turns),
    ("usage", _usage),
    ("limits", _limits),
    ("tools", _tools_check),
)
RUN_STRATEGY_CHECK_NAMES: tuple[str, ...] = tuple(name for name, _ in RUN_STRATEGY_CHECKS)


async def check_run_strategy(
    plugin: object,
    *,
    agent: Mapping[str, Any] | None = None,
    only: str | Iterable[str] | None = None,
    time_per_check: float = 30.0,
) -> None:
    """Check the run strategy that ``plugin`` returns from ``soulacy_run_strategy``, through
    ordinary runs of kernels it is registered in (a builtin plugin's module, such as
    ``soulacy.plugins.reasoning``, is checked as the kernels load it). ``agent`` holds SOUL.yaml
    keys that every agent of the kit gets, for a strategy that answers only for agents that ask
    for it (``{"reasoning": {"strategy": "react"}}``).

    Each run must be driven by the plugin's strategy. The model adds the numbers with a tool
    when it may, then answers. The checks (:data:`RUN_STRATEGY_CHECK_NAMES`): ``ends``, the
    strategy ends the run (``run.complete``, or a ``RunStop``), never returns with it
    unfinished; ``turns``, model calls follow turn boundaries (``run.turn``), so the run is
    counted and stored; ``usage``, every model call goes through ``run.call_model``, which
    accounts for its tokens; ``limits``, under ``budget.max_llm_calls: 3`` the model is called
    at most 3 times; ``tools``, every tool it runs goes through ``run.call_tool``, counted and
    recorded.

    A failure is an AssertionError naming the check, what was expected and what came back.
    ``only`` runs the checks it names (one name or several) and no other; an unknown name is a
    ValueError listing them. Each check has ``time_per_check`` seconds.
    """
    selected = select_checks("run strategy", RUN_STRATEGY_CHECK_NAMES, only)
    keys = dict(agent or {})
    await _run_checks(
        "run strategy",
        RUN_STRATEGY_CHECKS,
        selected,
        lambda: _Kit("run strategy", plugin, _StrategyKitPlugin(), keys),
        time_per_check,
    )
