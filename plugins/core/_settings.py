"""The core agent keys' types, imported when the configuration is read: registering the plugin
(``soulacy --help``) imports no attrs class (decisions 0036 and 0038)."""

from __future__ import annotations

import attrs


@attrs.frozen
class AgentLLM:
    """The ``llm`` key of SOUL.yaml: which model an agent uses and how it samples.

    Omitted values come from the workspace provider; ``top_p`` left out leaves nucleus sampling
    to the provider.
    """

    provider: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    tool_choice: str | None = None
    allowed_providers: list[str] = attrs.Factory(list)
