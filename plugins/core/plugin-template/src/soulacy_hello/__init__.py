"""The hello plugin: a ``greet`` tool and a ``hello:`` section in config.yaml.

A Soulacy plugin is a module whose ``soulacy_*`` functions implement hooks; the entry point in
pyproject.toml (group ``soulacy``) makes Soulacy load it. See the hook reference in Soulacy's
docs/hooks.md for every hook you can implement.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from soulacy.kernel import ConfigSection, Kernel, Tool, hookimpl


@attrs.frozen
class HelloConfig:
    """``hello:`` in config.yaml."""

    greeting: str = "Hello"


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    return [ConfigSection("hello", HelloConfig, doc="how the greet tool greets")]


@hookimpl
def soulacy_tools(kernel: Kernel, agent_id: str) -> Sequence[Tool]:
    config: HelloConfig = kernel.config.section("hello")

    async def greet(name: str) -> str:
        """Greet someone by name."""
        return f"{config.greeting}, {name}!"

    return [Tool.from_function(greet, effects="read")]  # it changes nothing: safe to run again
