"""The builtin ``a2a`` plugin: the workspace's agents served over the A2A protocol (1.0, its
JSON-RPC binding, and 0.3's methods as translations of 1.0's), and remote A2A agents (1.0 or
0.3) used as tools.

**Server** (``soulacy serve``), as routes of the HTTP plugin (``soulacy_http_routes``), behind
its Host and Origin checks and bearer keys:

- ``GET /.well-known/agent-card.json``: the workspace's card, each agent a skill with its own
  interface; ``GET /api/v1/a2a/{agent_id}/.well-known/agent-card.json``: one agent's card,
  its skills from SOUL.yaml ``a2a_skills`` (by default the agent itself, by its ``description``).
- ``POST /api/v1/a2a/{agent_id}``: ``SendMessage``, ``SendStreamingMessage`` (SSE, the reply's
  text as chunks of its artifact while the model writes it), ``GetTask``, ``ListTasks``,
  ``CancelTask``, ``SubscribeToTask`` (0.3: ``message/send``, ``message/stream``, ``tasks/get``,
  ``tasks/cancel``, ``tasks/resubscribe``). A task is a run (task id = run id, context id =
  session id) stored under the caller's principal; a context id continues that principal's
  conversation only; cancelling a task cancels the run; subscribing again with
  ``Last-Event-ID`` gives the events missed. Push notification configs (1.0's four methods)
  POST a task's updates to URLs under config.yaml ``a2a.push_urls`` (the trust root; empty: off).

**Client**: SOUL.yaml ``a2a_agents: {name: {url, api_key_env}}`` makes each remote agent a tool
``a2a__<name>`` (``{"text": ..., "context_id": ...?}``), called over plain JSON-RPC with httpx,
streamed when the remote card says it streams; a call cut before its remote task ended cancels
that task. Call ids, replay and receipts apply to it as to any tool. ``a2a_agents`` is the trust
root (it names URLs and environment variables): an editor over HTTP cannot change it.

Nothing beyond httpx is needed at run time (the wire format is JSON); the ``a2a-sdk`` is what
the tests speak to it with. Disable the plugin (``plugins: {disable: [a2a]}``) to serve no A2A
route. See docs/a2a.md and decision 0070.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import StashKey, hookimpl

if TYPE_CHECKING:  # the routes import trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import AgentSpec, ConfigIssue, ConfigSection, Kernel, Settings, Tool

    from ._server import A2aServer  # noqa: F401  (the stash key's type, a string)

__all__: list[str] = []

_server_key = StashKey["A2aServer"]("a2a server")


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[Any]:
    from soulacy.plugins.http import HttpRoute

    from ._server import AGENT_CARD_PATH, CARD_PATH, RPC_PATH, A2aServer

    served = kernel.stash.get(_server_key, None)
    if served is None:
        served = kernel.stash[_server_key] = A2aServer(kernel)
    return [
        HttpRoute("GET", CARD_PATH.replace(".", r"\."), served.workspace_card, api=False),
        HttpRoute("GET", AGENT_CARD_PATH, served.agent_card),
        HttpRoute("POST", RPC_PATH, served.rpc),
    ]


@hookimpl
def soulacy_config_sections() -> Sequence[ConfigSection]:
    from soulacy.kernel import ConfigSection

    from ._skills import A2aConfig, RemoteAgent, Skill

    return [
        ConfigSection("a2a", A2aConfig, doc="the A2A server: where push notifications may go"),
        # URLs the server POSTs task updates to (a client names one of them: docs/a2a.md).
        ConfigSection.trust_root("a2a.push_urls", doc="URLs the server sends task updates to"),
        ConfigSection(
            "a2a_skills", list[Skill] | None, scope="agent", doc="its skills on its A2A card"
        ),
        ConfigSection(
            "a2a_agents",
            dict[str, RemoteAgent],
            scope="agent",
            default=dict,
            doc="remote A2A agents it may call, each a tool a2a__<name>",
        ),
        # URLs the kernel sends keys to, and the variables holding them (docs/security.md).
        ConfigSection.trust_root(
            "a2a_agents", "agent", doc="remote agents the kernel connects to with their keys"
        ),
    ]


@hookimpl
def soulacy_validate_config(config: Settings) -> Sequence[ConfigIssue]:
    from ._skills import config_issues

    return config_issues(config)


@hookimpl
def soulacy_validate_agent(kernel: Kernel, agent: AgentSpec) -> Sequence[ConfigIssue]:
    from ._skills import agent_issues

    return agent_issues(agent)


@hookimpl
def soulacy_tools(kernel: Kernel, agent: AgentSpec | None) -> Sequence[Tool]:
    if agent is None or not agent.section("a2a_agents"):
        return []
    from ._client import remote_tools

    return remote_tools(agent)
