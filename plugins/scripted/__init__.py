"""The scripted model: a deterministic provider for demos and tests, named as such.

It does not read what it is sent; it plays a script, one step per model call: a text answer, or
one or more tool calls. A script is a YAML file (``steps:``, ``repeat:``, ``start:``) or a
Python function ``(request, index) -> ModelReply | str``. Agents use it with ``llm: {provider:
scripted, model: path/to/script.yaml}`` (the path relative to the workspace), or through an
entry of ``llm.providers`` with ``type: scripted`` and ``options: {script: path}``.

Every run plays the script from its first step: the position is the run's own (its model calls
so far), so a served demo answers every chat and runs at the same time do not share steps; a
script with ``start: conversation`` starts each run where its conversation left off (a scripted
dialogue). The engine says which call of its run comes next through
``soulacy_admit_model_call``, in the task that makes the call; a call made outside any run goes
on from the provider's previous one. A run that asks for a step past the end of a script
without ``repeat`` fails (``ProviderError``: ``failed``, ``provider_error``, naming the script),
so that nothing counts it as a success.

A script is a file of the workspace: its path (relative to the workspace) must resolve inside it
(no ``..`` out, no absolute path elsewhere, no symlink out). The plugin checks every key that
names one when config.yaml or a SOUL.yaml loads (``soulacy_validate_config``,
``soulacy_validate_agent``: an error naming the key and the file, so that an editor over HTTP
answers ``422``), and the provider checks again before it reads one: an admin naming a file does
not make the server parse, and show in an error, any YAML file it can read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from soulacy.kernel import ConfigIssue, Location, Settings, UsageError, hookimpl, load_document
from soulacy.kernel.contracts import RunParticipant
from soulacy.kernel.messages import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    Usage,
)
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import ProviderConfig, ProviderError, ProviderType, TextSink

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec, Kernel
    from soulacy.kernel.engine import Run

__all__ = ["Script", "ScriptStep", "ScriptedProvider"]


@attrs.frozen
class ScriptToolCall:
    tool: str
    arguments: dict[str, Any] = attrs.Factory(dict)
    id: str | None = None


@attrs.frozen
class ScriptUsage:
    input: int = 0
    output: int = 0


@attrs.frozen
class ScriptStep:
    """One model reply: ``text``, or ``tool`` with ``arguments``, or several ``tool_calls``."""

    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = attrs.Factory(dict)
    id: str | None = None
    tool_calls: list[ScriptToolCall] = attrs.Factory(list)
    usage: ScriptUsage | None = None
    sleep: float = 0.0  # seconds to wait before replying (to exercise timeouts)


@attrs.frozen
class Script:
    steps: list[ScriptStep] = attrs.Factory(list)
    repeat: bool = False  # start again after the last step instead of ending the script
    # Where a run starts: at the first step ("run"), or after as many steps as its
    # conversation has model replies already ("conversation": a scripted dialogue).
    start: Literal["run", "conversation"] = "run"


ScriptFunction = Callable[[ModelRequest, int], "ModelReply | str"]


class _RunCall:
    """A model call a run is about to make: the run, and the call's index in it."""

    __slots__ = ("index", "run")

    def __init__(self, run: Run, index: int) -> None:
        self.run, self.index = run, index

    def in_conversation(self) -> int:
        """The call's index counting the model replies already in the run's conversation
        (the assistant messages of its loaded history) before this run's own calls."""
        history = self.run.messages[: self.run.first_new]
        return sum(1 for message in history if message.role == "assistant") + self.index


# The model call the current task is about to make for a run: set when the engine admits the
# call (a participant's ``before_model_call``, in the task that then makes it) and taken by the
# provider's ``complete``. A task's context is its own, so runs at the same time each see
# theirs; None: the call is not a run's (a provider called directly).
_RUN_CALL: ContextVar[_RunCall | None] = ContextVar("soulacy.scripted.run_call", default=None)


def _take_run_call() -> _RunCall | None:
    """The run's call being made (None outside a run); one admission is for one call. An
    admission left by a run that has ended (its call went to another provider) is not this
    call's."""
    call = _RUN_CALL.get()
    if call is None:
        return None
    _RUN_CALL.set(None)
    return None if call.run.result.finished_at else call


class ScriptedProvider:
    """Plays a script, from its first step in each run; ``calls`` counts the model calls it
    answered. ``source`` names the script in errors (its file)."""

    def __init__(
        self,
        name: str,
        script: Script | None = None,
        function: ScriptFunction | None = None,
        capacity: ModelCapacity | None = None,
        source: str | None = None,
    ) -> None:
        self.name = name
        self.script = script or Script()
        self.function = function
        self._capacity = capacity
        self.source = source
        self.calls = 0

    def capacity(self, model: str | None) -> ModelCapacity | None:
        return self._capacity

    def _position(self) -> int:
        """The index of the call being made: in its run (``start: conversation``: in its
        conversation), else (a call outside any run) among the calls this provider answered;
        counted as answered."""
        call = _take_run_call()
        if call is None:
            index = self.calls
        elif self.script.start == "conversation":
            index = call.in_conversation()
        else:
            index = call.index
        self.calls += 1
        return index

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        return await self._play(request, self._position(), on_text)

    async def _play(
        self, request: ModelRequest, index: int, on_text: TextSink | None = None
    ) -> ModelReply:
        """The reply of the model call at ``index`` (0-based) of the script."""
        if self.function is not None:
            produced = self.function(request, index)
            reply = produced if isinstance(produced, ModelReply) else _text_reply(produced)
        else:
            step = self._step(index)
            if step.sleep:
                import trio  # only a scripted pause needs it

                await trio.sleep(step.sleep)
            reply = _reply(step, index)
        if on_text is not None and reply.message.content:
            for chunk in _chunks(reply.message.content):
                await on_text(chunk)
        return reply

    def _step(self, index: int) -> ScriptStep:
        steps = self.script.steps
        script = f"the script {self.source}" if self.source else "its script"
        if not steps:
            raise ProviderError(f"scripted model {self.name!r}: {script} has no steps")
        if index >= len(steps):
            if not self.script.repeat:
                raise ProviderError(
                    f"scripted model {self.name!r}: {script} has ended after"
                    f" {_steps(len(steps))}: model call {index + 1} has no step to play"
                    " (add steps, or `repeat: true` to play it again from the start)"
                )
            index %= len(steps)
        return steps[index]

    async def aclose(self) -> None:
        return None


def _steps(count: int) -> str:
    return "one step" if count == 1 else f"{count} steps"


def _text_reply(text: str) -> ModelReply:
    return ModelReply(Message("assistant", text), Usage(0, len(text) // 4 + 1), "stop")


def _reply(step: ScriptStep, index: int) -> ModelReply:
    calls = list(step.tool_calls)
    if step.tool:
        calls.insert(0, ScriptToolCall(step.tool, step.arguments, step.id))
    tool_calls = tuple(
        ToolCall(call.id or f"call_{index}_{n}", call.tool, call.arguments)
        for n, call in enumerate(calls)
    )
    text = step.text or ""
    usage = (
        Usage(step.usage.input, step.usage.output) if step.usage else Usage(0, len(text) // 4 + 1)
    )
    finish = "tool_calls" if tool_calls else "stop"
    return ModelReply(Message("assistant", text, tool_calls=tool_calls), usage, finish)


def _chunks(text: str) -> Sequence[str]:
    words = text.split(" ")
    return [word + (" " if n < len(words) - 1 else "") for n, word in enumerate(words)]


OUTSIDE = "a scripted provider's script must be a file inside the workspace"


def workspaces(kernel: Kernel) -> tuple[Path, ...]:
    """The folders scripts may lie in, resolved: the kernel's workspace, and the one whose
    config.yaml is in force (a studio scratch kernel's workspace links the real one's files)."""
    roots = [kernel.workspace.resolve()]
    config_file = getattr(getattr(kernel, "config", None), "file", None)
    if config_file is not None:
        roots.append(Path(config_file).parent.resolve())
    return tuple(dict.fromkeys(roots))


def outside_the_workspace(roots: Sequence[Path], value: str) -> str | None:
    """Why the script ``value`` names (relative to the first of ``roots``, the workspace) may
    not be read: it resolves outside them (an absolute path elsewhere, ``..`` out, a symlink
    out); None when it may."""
    path = (roots[0] / value).resolve()  # an absolute value replaces the workspace
    if any(path.is_relative_to(root) for root in roots):
        return None
    where = str(roots[0])
    return f"{value!r} resolves to {str(path)!r}, outside the workspace {where!r} ({OUTSIDE})"


def script_path(roots: Sequence[Path], value: str, key: str) -> Path:
    """The script file ``value`` names, resolved in the workspace (the first of ``roots``); a
    UsageError naming ``key`` when it lies outside (nothing is read)."""
    why = outside_the_workspace(roots, value)
    if why is not None:
        raise UsageError(f"{key}: {why}")
    return (roots[0] / value).resolve()


def _create(name: str, config: ProviderConfig, kernel: Kernel) -> ScriptedProvider:
    capacity = ModelCapacity(config.context_window, config.max_output_tokens)
    script = config.options.get("script")
    if script is None:
        return _LazyScripted(name, workspaces(kernel), capacity)
    key = f"llm.providers.{name}.options.script"
    path = script_path(workspaces(kernel), str(script), key)
    if not path.is_file():
        raise UsageError(f"{key}: {path} does not exist")
    played = load_document(path, Script)
    return ScriptedProvider(name, played, capacity=capacity, source=str(script))


class _LazyScripted(ScriptedProvider):
    """The bare ``scripted`` type: the model name is the script's path in the workspace."""

    def __init__(self, name: str, roots: Sequence[Path], capacity: ModelCapacity) -> None:
        super().__init__(name, capacity=capacity)
        self.roots = roots
        self._by_model: dict[str, ScriptedProvider] = {}

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        model = request.model
        if not model:
            raise UsageError(
                "the scripted provider needs llm.model: the path of a script file in the workspace"
            )
        if model not in self._by_model:
            path = script_path(self.roots, model, "scripted model")
            if not path.is_file():
                raise UsageError(f"scripted model: script {path} does not exist")
            script = load_document(path, Script)
            self._by_model[model] = ScriptedProvider(self.name, script, source=model)
        self.calls += 1
        return await self._by_model[model].complete(request, on_text)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("scripted", _create)]


@hookimpl
def soulacy_run_participants(kernel: Kernel, run: Run) -> list[RunParticipant] | None:
    try:
        provider, _ = kernel.providers.model_of(run.agent)
        scripted = kernel.providers.config(provider).type == "scripted"
    except Exception:  # the run itself says what is wrong with its provider
        return None
    return [_CALLS] if scripted else None  # decided once per run


class _Calls(RunParticipant):
    """A scripted run's participant: tells the provider, in the task about to call it, which
    run calls and which of its model calls this is (``result.llm_calls`` counts the ones made
    before), so that every run plays its script from the first step."""

    def before_model_call(self, run: Run, request: ModelRequest) -> None:
        _RUN_CALL.set(_RunCall(run, run.result.llm_calls))


_CALLS = _Calls()


def _plays_the_model(providers: Any, name: str | None) -> bool:
    """Whether provider ``name`` reads its model name as a script path (a ``scripted`` entry
    without ``options.script``, or the bare ``scripted`` type)."""
    if not name:
        return False
    entry = providers.get(name) if isinstance(providers, Mapping) else None
    if entry is None:
        return name == "scripted"
    return bool(entry.type == "scripted" and entry.options.get("script") is None)


def _issue(settings: Settings, kernel: Kernel, key: str, value: str) -> list[ConfigIssue]:
    why = outside_the_workspace(workspaces(kernel), value)
    if why is None:
        return []
    location = settings.source_of(key) or Location(str(settings.file))
    return [ConfigIssue(location, key, why)]


@hookimpl
def soulacy_validate_config(kernel: Kernel, config: Settings) -> Sequence[ConfigIssue]:
    """Every script path of config.yaml resolves inside the workspace."""
    providers = config.values.get("llm.providers") or {}
    issues = []
    for name, entry in providers.items():
        if entry.type != "scripted":
            continue
        script = entry.options.get("script")
        if script is not None:
            issues += _issue(config, kernel, f"llm.providers.{name}.options.script", str(script))
        elif entry.model:
            issues += _issue(config, kernel, f"llm.providers.{name}.model", entry.model)
    default = config.values.get("llm.default")
    model = getattr(default, "model", None)
    if model and _plays_the_model(providers, getattr(default, "provider", None)):
        issues += _issue(config, kernel, "llm.default.model", model)
    return issues


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    """An agent's ``llm.model`` on a provider that plays it as a script resolves inside the
    workspace."""
    llm = agent.settings.values.get("llm")
    model = getattr(llm, "model", None)
    if not model:
        return []
    config = kernel.config
    default = config.values.get("llm.default")
    provider = getattr(llm, "provider", None) or getattr(default, "provider", None)
    if not _plays_the_model(config.values.get("llm.providers") or {}, provider):
        return []
    return _issue(agent.settings, kernel, "llm.model", model)
