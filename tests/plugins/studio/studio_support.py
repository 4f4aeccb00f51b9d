"""Helpers of the Studio build tests: a builder model that plays replies and records requests,
and workspaces whose ``llm.default`` is that model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from soulacy.kernel import Kernel
from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.policy import ModelCapacity
from soulacy.kernel.providers import ProviderType, TextSink
from soulacy.testing import Workspace, throwaway_plugin

Reply = str | Callable[[ModelRequest, int], str]
USAGE = Usage(100, 20)  # of every builder call unless a test says otherwise


def fenced(body: str, before: str = "Here is the agent:") -> str:
    """A model reply holding ``body`` in a yaml fenced block."""
    return f"{before}\n```yaml\n{body.strip()}\n```\n"


def soul(agent_id: str = "reporter", script: str = "good.yaml", **extra: str) -> str:
    """A valid SOUL.yaml on the scripted model, playing ``agents/<id>/<script>``."""
    lines = [
        f"id: {agent_id}",
        "name: Reporter",
        "system_prompt: You write the daily report.",
        f"llm: {{provider: scripted, model: agents/{agent_id}/{script}}}",
        "tools: []",
        *(f"{key}: {value}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


class FakeBuilder:
    """The builder model: plays ``replies`` in order (the last one repeats), each a text or a
    function of the request and call index; every call uses ``usage`` and may sleep first."""

    def __init__(
        self,
        replies: Sequence[Reply],
        usage: Usage = USAGE,
        sleep: float = 0.0,
    ) -> None:
        self.name = "builder"
        self.replies = list(replies)
        self.usage = usage
        self.sleep = sleep
        self.requests: list[ModelRequest] = []

    @property
    def prompts(self) -> list[str]:
        """The user message of every request."""
        return [request.messages[-1].content for request in self.requests]

    def capacity(self, model: str | None) -> ModelCapacity | None:
        return None

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelReply:
        index = len(self.requests)
        self.requests.append(request)
        if self.sleep:
            await trio.sleep(self.sleep)
        reply = self.replies[min(index, len(self.replies) - 1)]
        text = reply(request, index) if callable(reply) else reply
        return ModelReply(Message("assistant", text), self.usage, "stop")

    async def aclose(self) -> None:
        return None


@attrs.define
class Studio:
    """A workspace whose default model is a FakeBuilder."""

    workspace: Workspace
    make_kernel: Callable[..., Kernel]

    def script(self, name: str, *replies: str, agent_id: str = "reporter") -> None:
        """``agents/<agent_id>/<name>``: a scripted model answering ``replies`` (repeating)."""
        folder = self.workspace.path / "agents" / agent_id
        folder.mkdir(parents=True, exist_ok=True)
        steps = "".join(f"  - text: {reply!r}\n" for reply in replies)
        (folder / name).write_text(f"steps:\n{steps}repeat: true\n", encoding="utf-8")

    def kernel(
        self,
        builder: FakeBuilder,
        config: Mapping[str, Any] | None = None,
        plugins: Sequence[object] = (),
    ) -> Kernel:
        doc: dict[str, Any] = {"llm": {"default": {"provider": "builder"}}}
        for key, value in (config or {}).items():  # llm: {studio: …} keeps llm.default
            doc[key] = {**doc[key], **value} if key in doc else value
        self.workspace.write_config(doc)
        provider = throwaway_plugin(
            "builder-model",
            soulacy_provider_types=lambda: [
                ProviderType("builder", lambda name, config, kernel: builder)
            ],
        )
        return self.make_kernel(extra_plugins=[provider, *plugins])
