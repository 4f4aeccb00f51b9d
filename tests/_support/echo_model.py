"""A model named as such for tests: it answers with every user message it was sent.

Whatever reaches the model's input reaches its reply, so a test can see a conversation's
context leak by reading a reply. Load it with ``-p _support.echo_model`` (tests/ on the path);
agents use it with ``llm: {provider: echo}``.
"""

from __future__ import annotations

from collections.abc import Sequence

from soulacy.kernel.messages import Message, ModelReply, ModelRequest, Usage
from soulacy.kernel.providers import ProviderType
from soulacy.plugins.scripted import ScriptedProvider


def echo(request: ModelRequest, index: int) -> ModelReply:
    seen = [m.content for m in request.messages if m.role == "user"]
    return ModelReply(Message("assistant", "seen: " + " | ".join(seen)), Usage(1, 1))


def soulacy_provider_types() -> Sequence[ProviderType]:
    def create(name: str, config: object, kernel: object) -> ScriptedProvider:
        return ScriptedProvider(name, function=echo)

    return [ProviderType("echo", create)]
