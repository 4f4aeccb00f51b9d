"""The builtin ``agui`` plugin: a run as AG-UI events, for AG-UI frontends (docs/agui.md).

``POST /api/v1/agui/{agent_id}`` takes an AG-UI ``RunAgentInput`` (its ``threadId`` is the
conversation, its ``runId`` the run's id, its last user message the run's text) and answers the run
as AG-UI 1.0 events over Server-Sent Events: RUN_STARTED, MESSAGES_SNAPSHOT (the thread so far,
when it has messages), STATE_SNAPSHOT, the text message and tool call triads, TOOL_CALL_RESULT,
STATE_DELTA as the run's progress changes (model calls, tool calls, approvals waited for), and
RUN_FINISHED (the cancelled outcome for a run cancelled through ``POST /api/v1/chat/cancel``; the
interrupt outcome for a tool call waiting for approval, which the client's next run answers with
``resume`` and carries on) or RUN_ERROR. Every event has an ``id:``; ``GET
/api/v1/agui/runs/{run_id}/events`` with ``Last-Event-ID`` answers the rest.

The routes are the HTTP plugin's (``soulacy_http_routes``), behind its guards, keys and
principals: runs and conversations are a principal's. The events are written here as JSON; the
``ag-ui-protocol`` package is not needed to serve (the tests check every event with it).
Disable the plugin (``plugins: {disable: [agui]}``) to serve none of this.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from soulacy.kernel import StashKey, hookimpl

if TYPE_CHECKING:  # the routes import trio: registering the plugin does not (decision 0038)
    from soulacy.kernel import Kernel

    from ._routes import AguiRoutes  # noqa: F401  (the stash key's type, a string)

__all__: list[str] = []

_routes_key = StashKey["AguiRoutes"]("agui routes")


@hookimpl(optionalhook=True)  # the HTTP plugin's hook: absent when that plugin is disabled
def soulacy_http_routes(kernel: Kernel) -> Sequence[Any]:
    from soulacy.plugins.http import HttpRoute

    from ._routes import AguiRoutes

    served = kernel.stash.get(_routes_key, None)
    if served is None:
        served = kernel.stash[_routes_key] = AguiRoutes(kernel)
    return [
        HttpRoute("POST", r"/agui/(?P<agent_id>[^/]+)", served.run),
        HttpRoute("GET", r"/agui/runs/(?P<run_id>[^/]+)/events", served.events),
    ]
