"""The scripted model: a deterministic provider for demos and tests, named as such.

It does not read what it is sent; it plays a script, one step per model call: a text answer, or
one or more tool calls. A script is a YAML file (``steps:`` and ``repeat:``) or a Python function
``(request, index) -> ModelReply | str``. Agents use it with ``llm: {provider: scripted, model:
path/to/script.yaml}`` (the path relative to the workspace), or through an entry of
``llm.providers`` with ``type: scripted`` and ``options: {script: path}``.

A script is a file of the workspace: its path (relative to the workspace) must resolve inside it
(no ``..`` out, no absolute path elsewhere, no symlink out). The plugin checks every key that
names one when config.yaml or a SOUL.yaml loads (``soulacy_validate_config``,
``soulacy_validate_agent``: an error naming the key and the file, so that an editor over HTTP
answers ``422``), and the provider checks again before it reads one: an admin naming a file does
not make the server parse, and show in an error, any YAML file it can read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import ConfigIssue, Location, Settings, UsageError, hookimpl, load_document
from soulacy.kernel.messages import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCall,
    Usage,
)
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import ProviderConfig, ProviderType, TextSink

if TYPE_CHECKING:  # the kernel imports trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec, Kernel

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


ScriptFunction = Callable[[ModelRequest, int], "ModelReply | str"]


class ScriptedProvider:
    """Plays a script; ``calls`` counts the model calls it answered."""

    def __init__(
        self,
        name: str,
        script: Script | None = None,
        function: ScriptFunction | None = None,
        capacity: ModelCapacity | None = None,
    ) -> None:
        self.name = name
        self.script = script or Script()
        self.function = function
        self._capacity = capacity
        self.calls = 0

    def capacity(self, model: str | None) -> ModelCapacity | None:
        return self._capacity

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        index = self.calls
        self.calls += 1
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
        if not steps:
            return ScriptStep(text="(the script is empty)")
        if index >= len(steps):
            if not self.script.repeat:
                return ScriptStep(text="(the script has ended)")
            index %= len(steps)
        return steps[index]

    async def aclose(self) -> None:
        return None


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
    return ScriptedProvider(name, load_document(path, Script), capacity=capacity)


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
            self._by_model[model] = ScriptedProvider(self.name, load_document(path, Script))
        self.calls += 1
        return await self._by_model[model].complete(request, on_text)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("scripted", _create)]


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
