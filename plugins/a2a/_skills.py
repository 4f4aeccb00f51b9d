"""What the agent cards say an agent can do, from its SOUL.yaml, and the SOUL.yaml keys the
plugin declares: ``a2a_skills`` (the card's skills) and ``a2a_agents`` (remote agents as tools)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from soulacy.kernel import ConfigIssue, Location, Settings

if TYPE_CHECKING:
    from soulacy.kernel import AgentSpec

NAME = re.compile(r"[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*")  # a tool name part, as MCP servers' ids


@attrs.frozen
class Skill:
    """One skill of an agent's card (A2A's ``AgentSkill``)."""

    id: str
    name: str = ""
    description: str = ""
    tags: list[str] = attrs.Factory(list)
    examples: list[str] = attrs.Factory(list)


@attrs.frozen
class RemoteAgent:
    """A remote A2A agent an agent may call as a tool (SOUL.yaml ``a2a_agents.<name>``).

    ``url``: its A2A 1.0 JSON-RPC endpoint, or a base URL whose agent card
    (``/.well-known/agent-card.json``) names it; ``api_key_env``: the environment variable
    holding a bearer key for it (None: no Authorization header)."""

    url: str
    api_key_env: str | None = None
    description: str | None = None  # the tool's; by default the remote card's
    timeout: float = 300.0  # seconds one call may take


@attrs.frozen
class A2aConfig:
    """``a2a:`` in config.yaml: ``push_urls``, the URLs the server may POST push notifications
    to (a client's URL must begin with one: the same scheme, host and port, a path below);
    empty, push notifications are not served. The trust root: the server fetches them."""

    push_urls: list[str] = attrs.Factory(list)


def config_issues(settings: Settings) -> list[ConfigIssue]:
    from ._push import url_allowed

    try:
        config: A2aConfig = settings.section("a2a")
    except KeyError:  # pragma: no cover - the plugin declares it
        return []
    issues = []
    for index, url in enumerate(config.push_urls):
        if not url_allowed(url, [url]):
            where = settings.source_of("a2a.push_urls") or Location(str(settings.file))
            issues.append(
                ConfigIssue(
                    where,
                    f"a2a.push_urls.{index}",
                    "expected an http:// or https:// URL with a host (and no user name)",
                    url,
                )
            )
    return issues


def skills_of(agent: AgentSpec) -> list[dict[str, Any]]:
    """The agent's ``a2a_skills``; without them, one skill: the agent itself, described by its
    SOUL.yaml ``description``."""
    declared: list[Skill] | None = agent.section("a2a_skills")
    name = agent.section("name") or agent.id
    description = agent.section("description") or f"the agent {name!r}"
    if not declared:
        return [{"id": agent.id, "name": name, "description": description, "tags": [agent.id]}]
    return [
        {
            "id": skill.id,
            "name": skill.name or skill.id,
            "description": skill.description or description,
            "tags": list(skill.tags),
            **({"examples": list(skill.examples)} if skill.examples else {}),
        }
        for skill in declared
    ]


def agent_issues(agent: AgentSpec) -> list[ConfigIssue]:
    remotes: Mapping[str, RemoteAgent] = agent.section("a2a_agents") or {}
    settings = agent.settings
    issues = []
    for name, remote in remotes.items():
        path = f"a2a_agents.{name}"
        where = settings.source_of(path) or Location(str(settings.file))
        if not NAME.fullmatch(name):
            message = (
                "expected a name of letters, digits, '-' and single '_' (the tool a2a__<name>)"
            )
            issues.append(ConfigIssue(where, path, message, name, True))
        if not remote.url.startswith(("http://", "https://")):
            issues.append(ConfigIssue(where, f"{path}.url", "expected an http:// or https:// URL"))
        if remote.timeout <= 0:
            issues.append(ConfigIssue(where, f"{path}.timeout", "expected seconds above 0"))
    return issues
