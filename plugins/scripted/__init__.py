"""The scripted model: a deterministic provider for demos and tests, named as such.

It does not read what it is sent; it plays a script, one step per model call: a text answer, or
one or more tool calls. A script is a YAML file (``steps:`` and ``repeat:``) or a Python function
``(request, index) -> ModelReply | str``. Agents use it with ``llm: {provider: scripted, model:
path/to/script.yaml}`` (the path relative to the workspace), or through an entry of
``llm.providers`` with ``type: scripted`` and ``options: {script: path}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import UsageError, hookimpl, load_document
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
    from soulacy.kernel import Kernel

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


def _create(name: str, config: ProviderConfig, kernel: Kernel) -> ScriptedProvider:
    capacity = ModelCapacity(config.context_window, config.max_output_tokens)
    script_path = config.options.get("script")
    if script_path is None:
        return _LazyScripted(name, kernel.workspace, capacity)
    path = Path(kernel.workspace, str(script_path))
    if not path.is_file():
        raise UsageError(f"llm.providers.{name}.options.script: {path} does not exist")
    return ScriptedProvider(name, load_document(path, Script), capacity=capacity)


class _LazyScripted(ScriptedProvider):
    """The bare ``scripted`` type: the model name is the script's path in the workspace."""

    def __init__(self, name: str, workspace: Path, capacity: ModelCapacity) -> None:
        super().__init__(name, capacity=capacity)
        self.workspace = workspace
        self._by_model: dict[str, ScriptedProvider] = {}

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        model = request.model
        if not model:
            raise UsageError(
                "the scripted provider needs llm.model: the path of a script file in the workspace"
            )
        if model not in self._by_model:
            path = self.workspace / model
            if not path.is_file():
                raise UsageError(f"scripted model: script {path} does not exist")
            self._by_model[model] = ScriptedProvider(self.name, load_document(path, Script))
        self.calls += 1
        return await self._by_model[model].complete(request, on_text)


@hookimpl
def soulacy_provider_types() -> Sequence[ProviderType]:
    return [ProviderType("scripted", _create)]
